package benchspa;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.api.common.JobExecutionResult;
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
 * <p>Usage: {@code ReadAllStates <checkpoint dir> [parallelism] [--per-state] [--unmanaged-memory]}.
 * By default one reader function per operator reads all of its states; {@code --per-state} reads
 * each state with its own reader function (one {@code readKeyedState} per state).
 * {@code --unmanaged-memory} sets {@code state.backend.rocksdb.memory.managed: false} on the
 * RocksDB backend (the State Processor API's environment fixes managed memory at 64 MB). The same
 * source compiles against Flink 1.20 and 2.x (bench/spa/pom.xml, {@code -Dflink.version}); the
 * fixture job's classes (AccountProfile, Wave) must be on the class path: the POJO and enum
 * serializers restore them.
 */
public final class ReadAllStates {

    /** A state to read: its descriptor and how its rows are counted and hashed for one key. */
    private interface Spec extends java.io.Serializable {
        StateDescriptor<?, ?> descriptor();

        /** Adds the rows of {@code state} for {@code key}: {@code rows[0]} count, {@code rows[1]} checksum. */
        void read(Object key, State state, long[] rows) throws Exception;
    }

    private static Spec value(String name, TypeInformation<?> type, boolean ttl) {
        ValueStateDescriptor<Object> descriptor = new ValueStateDescriptor<>(name, (TypeInformation<Object>) type);
        if (ttl) {
            descriptor.enableTimeToLive(StateTtlConfig.newBuilder(Duration.ofDays(3650)).build());
        }
        return new Spec() {
            public StateDescriptor<?, ?> descriptor() { return descriptor; }

            public void read(Object key, State state, long[] rows) throws Exception {
                Object v = ((ValueState<?>) state).value();
                if (v != null) {
                    rows[0]++;
                    rows[1] += hash(key) * 31 + hash(v);
                }
            }
        };
    }

    private static Spec list(String name, TypeInformation<?> element) {
        ListStateDescriptor<Object> descriptor = new ListStateDescriptor<>(name, (TypeInformation<Object>) element);
        return new Spec() {
            public StateDescriptor<?, ?> descriptor() { return descriptor; }

            public void read(Object key, State state, long[] rows) throws Exception {
                Iterable<?> values = ((ListState<?>) state).get();
                if (values != null) {
                    for (Object v : values) {
                        rows[0]++;
                        rows[1] += hash(key) * 31 + hash(v);
                    }
                }
            }
        };
    }

    private static Spec map(String name, TypeInformation<?> k, TypeInformation<?> v) {
        MapStateDescriptor<Object, Object> descriptor =
                new MapStateDescriptor<>(name, (TypeInformation<Object>) k, (TypeInformation<Object>) v);
        return new Spec() {
            public StateDescriptor<?, ?> descriptor() { return descriptor; }

            public void read(Object key, State state, long[] rows) throws Exception {
                for (Map.Entry<?, ?> e : ((MapState<?, ?>) state).entries()) {
                    rows[0]++;
                    rows[1] += (hash(key) * 31 + hash(e.getKey())) * 31 + hash(e.getValue());
                }
            }
        };
    }

    private static Spec reducingLong(String name) {
        ReducingStateDescriptor<Long> descriptor = new ReducingStateDescriptor<>(name, Long::sum, Types.LONG);
        return new Spec() {
            public StateDescriptor<?, ?> descriptor() { return descriptor; }

            public void read(Object key, State state, long[] rows) throws Exception {
                Object v = ((ReducingState<?>) state).get();
                if (v != null) {
                    rows[0]++;
                    rows[1] += hash(key) * 31 + hash(v);
                }
            }
        };
    }

    /** The accumulator as it is (reading needs no aggregation). */
    private static final class Identity implements AggregateFunction<Long, Tuple2<Long, Long>, Tuple2<Long, Long>> {
        public Tuple2<Long, Long> createAccumulator() { return Tuple2.of(0L, 0L); }

        public Tuple2<Long, Long> add(Long value, Tuple2<Long, Long> acc) { return Tuple2.of(acc.f0 + 1, acc.f1 + value); }

        public Tuple2<Long, Long> getResult(Tuple2<Long, Long> acc) { return acc; }

        public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) { return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1); }
    }

    private static Spec aggregatingPair(String name) {
        AggregatingStateDescriptor<Long, Tuple2<Long, Long>, Tuple2<Long, Long>> descriptor =
                new AggregatingStateDescriptor<>(name, new Identity(), Types.TUPLE(Types.LONG, Types.LONG));
        return new Spec() {
            public StateDescriptor<?, ?> descriptor() { return descriptor; }

            public void read(Object key, State state, long[] rows) throws Exception {
                Object v = ((AggregatingState<?, ?>) state).get();
                if (v != null) {
                    rows[0]++;
                    rows[1] += hash(key) * 31 + hash(v);
                }
            }
        };
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

    /** Reads every state of one operator for each key; counts go to accumulators {@code op/state}. */
    static final class Reader extends KeyedStateReaderFunction<Object, Integer> {
        private final String operator;
        private final List<Spec> specs;
        private transient List<State> states;
        private transient List<LongCounter[]> counters;
        private final long[] rows = new long[2];

        Reader(String operator, List<Spec> specs) {
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
                StateDescriptor<?, ?> d = spec.descriptor();
                State state;
                if (d instanceof ValueStateDescriptor) {
                    state = getRuntimeContext().getState((ValueStateDescriptor<?>) d);
                } else if (d instanceof ListStateDescriptor) {
                    state = getRuntimeContext().getListState((ListStateDescriptor<?>) d);
                } else if (d instanceof MapStateDescriptor) {
                    state = getRuntimeContext().getMapState((MapStateDescriptor<?, ?>) d);
                } else if (d instanceof ReducingStateDescriptor) {
                    state = getRuntimeContext().getReducingState((ReducingStateDescriptor<?>) d);
                } else {
                    state = getRuntimeContext().getAggregatingState((AggregatingStateDescriptor<?, ?, ?>) d);
                }
                states.add(state);
                counters.add(new LongCounter[] {counter("rows:" + operator + "/" + d.getName()),
                        counter("checksum:" + operator + "/" + d.getName())});
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

        @Override
        public void readKey(Object key, Context context, Collector<Integer> out) throws Exception {
            for (int i = 0; i < specs.size(); i++) {
                rows[0] = 0;
                rows[1] = 0;
                specs.get(i).read(key, states.get(i), rows);
                counters.get(i)[0].add(rows[0]);
                counters.get(i)[1].add(rows[1]);
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
        boolean perState = options.contains("--per-state");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(parallelism);
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
