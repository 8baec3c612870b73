package benchspa;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.AggregatingState;
import org.apache.flink.api.common.state.AggregatingStateDescriptor;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.state.State;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.ConfigurableStateBackend;
import org.apache.flink.runtime.state.StateBackend;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.state.api.functions.KeyedStateReaderFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * Reads every keyed state of the keyed process functions of the fixture job ({@code fixtures/job}:
 * per-user, per-account, per-type) from a checkpoint with the State Processor API, and counts and
 * checksums the rows as {@code repair export} counts them: one per value, list element or map entry.
 * Counts and checksums are accumulators (nothing is collected to the client); the last line printed
 * is JSON with the rows per operator and state, the checksums and the seconds of the job.
 *
 * <p>Usage: {@code ReadAllStates <checkpoint dir> [parallelism] [--per-state] [--unmanaged-memory] [--parquet OUT]}.
 * By default one reader function per operator reads all of its states; {@code --per-state} reads
 * each state with its own reader function (one {@code readKeyedState} per state).
 * {@code --unmanaged-memory} sets {@code state.backend.rocksdb.memory.managed: false} on the
 * RocksDB backend (the State Processor API's environment fixes managed memory at 64 MB).
 * {@code --parquet OUT} reads each state with its own reader function and writes its rows to Parquet
 * under {@code OUT} too ({@link ParquetStates}; the class path needs target/lib/parquet/). The same
 * source compiles against Flink 1.20 and 2.x (bench/spa/pom.xml, {@code -Dflink.version}); the
 * fixture job's classes (AccountProfile, Wave) must be on the class path: the POJO and enum
 * serializers restore them.
 */
public final class ReadAllStates {

    /** The rows of one state for one key, as {@code repair export} gives them. */
    interface Rows {
        /** One row: {@code userKey} of map state (else null), {@code index} of list state (else -1). */
        void row(Object userKey, int index, Object value) throws Exception;
    }

    private enum Kind { VALUE, LIST, MAP, REDUCING, AGGREGATING }

    /** A state to read: its descriptor, its kind and the types of its map keys and values. */
    static final class Spec implements java.io.Serializable {
        final StateDescriptor<?, ?> descriptor;
        final Kind kind;
        final TypeInformation<?> userKeyType;
        final TypeInformation<?> valueType;

        Spec(StateDescriptor<?, ?> descriptor, Kind kind, TypeInformation<?> userKeyType, TypeInformation<?> valueType) {
            this.descriptor = descriptor;
            this.kind = kind;
            this.userKeyType = userKeyType;
            this.valueType = valueType;
        }

        String name() {
            return descriptor.getName();
        }

        boolean isList() {
            return kind == Kind.LIST;
        }

        /** The state of the reader function's runtime context. */
        State register(org.apache.flink.api.common.functions.RuntimeContext context) {
            switch (kind) {
                case VALUE: return context.getState((ValueStateDescriptor<?>) descriptor);
                case LIST: return context.getListState((ListStateDescriptor<?>) descriptor);
                case MAP: return context.getMapState((MapStateDescriptor<?, ?>) descriptor);
                case REDUCING: return context.getReducingState((ReducingStateDescriptor<?>) descriptor);
                default: return context.getAggregatingState((AggregatingStateDescriptor<?, ?, ?>) descriptor);
            }
        }

        /** Gives the current key's rows of {@code state}: a value, each list element, each map entry. */
        void rows(State state, Rows out) throws Exception {
            Object v;
            switch (kind) {
                case LIST:
                    Iterable<?> values = ((ListState<?>) state).get();
                    if (values != null) {
                        int i = 0;
                        for (Object e : values) {
                            out.row(null, i++, e);
                        }
                    }
                    return;
                case MAP:
                    for (Map.Entry<?, ?> e : ((MapState<?, ?>) state).entries()) {
                        out.row(e.getKey(), -1, e.getValue());
                    }
                    return;
                case VALUE: v = ((ValueState<?>) state).value(); break;
                case REDUCING: v = ((ReducingState<?>) state).get(); break;
                default: v = ((AggregatingState<?, ?>) state).get();
            }
            if (v != null) {
                out.row(null, -1, v);
            }
        }

        /** Adds one row to {@code rows}: {@code rows[0]} count, {@code rows[1]} checksum. */
        void count(Object key, Object userKey, Object value, long[] rows) {
            rows[0]++;
            rows[1] += kind == Kind.MAP ? (hash(key) * 31 + hash(userKey)) * 31 + hash(value) : hash(key) * 31 + hash(value);
        }
    }

    private static Spec value(String name, TypeInformation<?> type, boolean ttl) {
        ValueStateDescriptor<Object> descriptor = new ValueStateDescriptor<>(name, (TypeInformation<Object>) type);
        if (ttl) {
            descriptor.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofDays(3650)).build());
        }
        return new Spec(descriptor, Kind.VALUE, null, type);
    }

    private static Spec list(String name, TypeInformation<?> element) {
        return new Spec(new ListStateDescriptor<>(name, (TypeInformation<Object>) element), Kind.LIST, null, element);
    }

    private static Spec map(String name, TypeInformation<?> k, TypeInformation<?> v) {
        return new Spec(new MapStateDescriptor<>(name, (TypeInformation<Object>) k, (TypeInformation<Object>) v), Kind.MAP, k, v);
    }

    private static Spec reducingLong(String name) {
        return new Spec(new ReducingStateDescriptor<>(name, Long::sum, Types.LONG), Kind.REDUCING, null, Types.LONG);
    }

    /** The accumulator as it is (reading needs no aggregation). */
    private static final class Identity implements AggregateFunction<Long, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        public Tuple2<Long, Long> createAccumulator() { return Tuple2.of(0L, 0L); }

        public Tuple2<Long, Long> add(Long value, Tuple2<Long, Long> acc) { return Tuple2.of(acc.f0 + 1, acc.f1 + value); }

        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> acc) { return acc; }

        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) { return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1); }
    }

    private static Spec aggregatingPair(String name) {
        TypeInformation<Tuple2<Long, Long>> pair = Types.TUPLE(Types.LONG, Types.LONG);
        return new Spec(new AggregatingStateDescriptor<>(name, new Identity(), pair), Kind.AGGREGATING, null, pair);
    }

    static long hash(Object v) {
        if (v instanceof byte[]) {
            return Arrays.hashCode((byte[]) v);
        }
        return v == null ? 0 : v.hashCode();
    }

    /** The states of each operator, as the fixture job declares them. */
    static Map<String, List<Spec>> operators() throws ClassNotFoundException {
        ClassLoader loader = ReadAllStates.class.getClassLoader();
        Class<?> profile = Class.forName("fixturejob.AccountProfile", false, loader);
        @SuppressWarnings({"rawtypes"})
        Class wave = Class.forName("fixturejob.Wave", false, loader);
        Map<String, List<Spec>> ops = new TreeMap<>();
        ops.put("per-user", Arrays.asList(
                value("count", Types.LONG, false), value("last-tag", Types.STRING, false), list("tags", Types.STRING),
                map("amount-by-tag", Types.STRING, Types.LONG), reducingLong("total"), value("recent-tag", Types.STRING, true)));
        ops.put("per-account", Arrays.asList(
                value("balance", Types.LONG, false), list("amounts", Types.LONG), aggregatingPair("stats"),
                map("user-by-wave", Types.INT, Types.STRING), value("profile", TypeInformation.of(profile), false)));
        @SuppressWarnings("unchecked")
        TypeInformation<?> waveType = Types.ENUM(wave);
        ops.put("per-type", Arrays.asList(
                value("small", Types.SHORT, false), value("tiny", Types.BYTE, false), value("positive", Types.BOOLEAN, false),
                value("ratio", Types.DOUBLE, false), value("ratio32", Types.FLOAT, false), value("initial", Types.CHAR, false),
                value("tag-bytes", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO, false), value("wave", waveType, false),
                value("last-row", Types.ROW(Types.STRING, Types.LONG, Types.DOUBLE), true),
                value("recent-small", Types.LIST(Types.SHORT), false), value("ratio32-by-tag", Types.MAP(Types.STRING, Types.FLOAT), false),
                map("ratio-by-initial", Types.CHAR, Types.DOUBLE), list("checks", Types.TUPLE(Types.STRING, Types.BOOLEAN)),
                list("rows", Types.ROW(Types.INT, Types.STRING))));
        return ops;
    }

    /**
     * A reader function over some states of one operator: registers them and counts and checksums
     * each state's rows into accumulators {@code rows:op/state} and {@code checksum:op/state}.
     */
    abstract static class StateReader<OUT> extends KeyedStateReaderFunction<Object, OUT> {
        final String operator;
        final List<Spec> specs;
        transient List<State> states;
        private transient List<LongCounter[]> counters;
        private final long[] rows = new long[2];

        StateReader(String operator, List<Spec> specs) {
            this.operator = operator;
            this.specs = specs;
        }

        /** Abstract in the 1.20 State Processor API, gone in 2.x; both call {@link #open(OpenContext)}. */
        public void open(Configuration parameters) {}

        @Override
        public void open(OpenContext context) throws Exception {
            states = new ArrayList<>();
            counters = new ArrayList<>();
            for (Spec spec : specs) {
                states.add(spec.register(getRuntimeContext()));
                counters.add(new LongCounter[] {counter("rows:" + operator + "/" + spec.name()),
                        counter("checksum:" + operator + "/" + spec.name())});
            }
        }

        /** The subtask's accumulator {@code name}: a subtask given a second split opens the function again. */
        private LongCounter counter(String name) {
            LongCounter existing = (LongCounter) getRuntimeContext().<Long, Long>getAccumulator(name);
            if (existing != null) {
                return existing;
            }
            LongCounter created = new LongCounter();
            getRuntimeContext().addAccumulator(name, created);
            return created;
        }

        /** Counts the rows of state {@code i} for {@code key}, giving each to {@code each} too; how many. */
        long read(int i, Object key, Rows each) throws Exception {
            Spec spec = specs.get(i);
            rows[0] = 0;
            rows[1] = 0;
            spec.rows(states.get(i), (userKey, index, value) -> {
                spec.count(key, userKey, value, rows);
                each.row(userKey, index, value);
            });
            counters.get(i)[0].add(rows[0]);
            counters.get(i)[1].add(rows[1]);
            return rows[0];
        }
    }

    /** Reads its states for each key and only counts the rows. */
    static final class Reader extends StateReader<Integer> {
        Reader(String operator, List<Spec> specs) {
            super(operator, specs);
        }

        @Override
        public void readKey(Object key, Context context, Collector<Integer> out) throws Exception {
            for (int i = 0; i < specs.size(); i++) {
                read(i, key, (userKey, index, value) -> {});
            }
            out.collect(specs.size());  // the input format reads the next key only after a record: without one, it stops
        }
    }

    /** The RocksDB backend of the Flink on the class path (its package moved in 2.0). */
    static StateBackend rocksdb(boolean unmanagedMemory) throws Exception {
        Class<?> backend;
        try {
            backend = Class.forName("org.apache.flink.state.rocksdb.EmbeddedRocksDBStateBackend");
        } catch (ClassNotFoundException flink1) {
            backend = Class.forName("org.apache.flink.contrib.streaming.state.EmbeddedRocksDBStateBackend");
        }
        StateBackend rocksdb = (StateBackend) backend.getDeclaredConstructor().newInstance();
        if (!unmanagedMemory) {
            return rocksdb;
        }
        Configuration conf = new Configuration();
        conf.setString("state.backend.rocksdb.memory.managed", "false");
        return ((ConfigurableStateBackend) rocksdb).configure(conf, ReadAllStates.class.getClassLoader());
    }

    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        long started = System.nanoTime();
        List<String> options = Arrays.asList(args);
        String path = args[0];
        int parallelism = args.length > 1 && !args[1].startsWith("--") ? Integer.parseInt(args[1]) : 1;
        int parquetAt = options.indexOf("--parquet");
        String parquet = parquetAt >= 0 ? args[parquetAt + 1] : null;
        boolean perState = options.contains("--per-state") || parquet != null;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
        if (parquet != null) {
            env.setRuntimeMode(RuntimeExecutionMode.BATCH);  // the FileSink publishes its files at the end of the input
            // each row is a new record: no copy of it between the chained reader, filter and writer
            // (about 10% of the job's CPU at 186 MB, docs/benchmarks/state-processor-api.md)
            env.getConfig().enableObjectReuse();
        }
        SavepointReader savepoint = SavepointReader.read(env, path, rocksdb(options.contains("--unmanaged-memory")));
        Map<String, TypeInformation<?>> keys = Map.of("per-user", Types.STRING, "per-account", Types.LONG, "per-type", Types.INT);
        for (Map.Entry<String, List<Spec>> op : operators().entrySet()) {
            List<List<Spec>> readers = new ArrayList<>();
            if (perState) {
                op.getValue().forEach(spec -> readers.add(List.of(spec)));
            } else {
                readers.add(op.getValue());
            }
            for (List<Spec> specs : readers) {
                if (parquet != null) {
                    ParquetStates.write(savepoint, op.getKey(), specs.get(0), keys.get(op.getKey()), parquet);
                    continue;
                }
                savepoint.readKeyedState(OperatorIdentifier.forUid(op.getKey()), new Reader(op.getKey(), specs),
                                (TypeInformation<Object>) keys.get(op.getKey()), Types.INT)
                        .sinkTo(new DiscardingSink<>());
            }
        }
        JobExecutionResult result = env.execute("read every keyed state");
        StringBuilder json = new StringBuilder("{\"states\": {");
        long total = 0;
        boolean first = true;
        for (Map.Entry<String, Object> e : new TreeMap<>(result.getAllAccumulatorResults()).entrySet()) {
            if (!e.getKey().startsWith("rows:")) {
                continue;
            }
            String state = e.getKey().substring(5);
            long rows = (Long) e.getValue();
            total += rows;
            Object checksum = result.getAllAccumulatorResults().get("checksum:" + state);
            json.append(first ? "" : ", ").append('"').append(state).append("\": [").append(rows).append(", ").append(checksum).append(']');
            first = false;
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        json.append("}, \"rows\": ").append(total).append(", \"job_seconds\": ").append(result.getNetRuntime() / 1000.0)
                .append(", \"seconds\": ").append(seconds).append('}');
        System.out.println(json);
    }
}
