import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSchemaCompatibility;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.base.BooleanSerializer;
import org.apache.flink.api.common.typeutils.base.EnumSerializer;
import org.apache.flink.api.common.typeutils.base.GenericArraySerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.typeutils.TypeExtractor;
import org.apache.flink.api.java.typeutils.runtime.EitherSerializer;
import org.apache.flink.api.java.typeutils.runtime.NullableSerializer;
import org.apache.flink.api.java.typeutils.runtime.RowSerializer;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.api.java.typeutils.runtime.ValueSerializer;
import org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.core.memory.DataOutputViewStreamWrapper;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorBackendSerializationProxy;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.RegisteredBroadcastStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredOperatorStateBackendMetaInfo;
import org.apache.flink.runtime.state.RegisteredPriorityQueueStateBackendMetaInfo;
import org.apache.flink.runtime.state.SnappyStreamCompressionDecorator;
import org.apache.flink.runtime.state.VoidNamespaceSerializer;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;
import org.apache.flink.streaming.api.operators.TimerSerializer;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.types.StringValue;
import org.apache.flink.util.IOUtils;

import java.io.ByteArrayOutputStream;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Writes keyed and operator backend meta data (KeyedBackendSerializationProxy,
 * OperatorBackendSerializationProxy) with Flink's own classes (flink-dist 2.1.1), covering serializer
 * snapshot classes the fixture jobs do not use, a snapshot class unknown to the decoder, and a
 * Snappy-compressed full-snapshot key-group stream. Not part of the build: run by hand, output committed:
 *
 *   javac -cp flink-dist-2.1.1.jar -d /tmp/gen GenerateBackendMetaSamples.java
 *   java -cp flink-dist-2.1.1.jar:/tmp/gen GenerateBackendMetaSamples tests/data/flink_metadata
 */
public class GenerateBackendMetaSamples {
    public enum Color { RED, GREEN, BLUE }

    /** A POJO. */
    public static class Profile {
        public String owner;
        public long updates;
        public List<String> tags;
        public Profile() {}
    }

    /** Not a POJO (no default constructor): Kryo. */
    public static class Opaque {
        final int x;
        Opaque(int x) { this.x = x; }
    }

    /** A serializer whose snapshot class the decoder cannot know; its payload is a few odd bytes. */
    public static final class OddSnapshot implements TypeSerializerSnapshot<Long> {
        public OddSnapshot() {}
        public int getCurrentVersion() { return 7; }
        public void writeSnapshot(DataOutputView out) throws IOException {
            out.writeInt(3);
            out.writeUTF("unframed payload");
            out.writeLong(99L);
        }
        public void readSnapshot(int v, DataInputView in, ClassLoader cl) throws IOException {}
        public TypeSerializer<Long> restoreSerializer() { return new OddSerializer(); }
        public TypeSerializerSchemaCompatibility<Long> resolveSchemaCompatibility(TypeSerializerSnapshot<Long> old) {
            return TypeSerializerSchemaCompatibility.compatibleAsIs();
        }
    }

    public static final class OddSerializer extends TypeSerializer<Long> {
        public boolean isImmutableType() { return true; }
        public TypeSerializer<Long> duplicate() { return this; }
        public Long createInstance() { return 0L; }
        public Long copy(Long from) { return from; }
        public Long copy(Long from, Long reuse) { return from; }
        public int getLength() { return 8; }
        public void serialize(Long record, DataOutputView target) throws IOException { target.writeLong(record); }
        public Long deserialize(DataInputView source) throws IOException { return source.readLong(); }
        public Long deserialize(Long reuse, DataInputView source) throws IOException { return source.readLong(); }
        public void copy(DataInputView source, DataOutputView target) throws IOException { target.writeLong(source.readLong()); }
        public boolean equals(Object obj) { return obj instanceof OddSerializer; }
        public int hashCode() { return 1; }
        public TypeSerializerSnapshot<Long> snapshotConfiguration() { return new OddSnapshot(); }
    }

    static StateMetaInfoSnapshot keyed(StateDescriptor.Type type, String name, TypeSerializer<?> ns, TypeSerializer<?> value) {
        return new RegisteredKeyValueStateBackendMetaInfo<>(type, name, (TypeSerializer<Object>) ns, (TypeSerializer<Object>) value).snapshot();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    public static void main(String[] args) throws Exception {
        String dir = args[0];
        SerializerConfigImpl config = new SerializerConfigImpl();
        TypeSerializer<Profile> pojo = TypeExtractor.createTypeInfo(Profile.class).createSerializer(config);
        List<StateMetaInfoSnapshot> states = new ArrayList<>();
        states.add(keyed(StateDescriptor.Type.VALUE, "tuple", VoidNamespaceSerializer.INSTANCE,
                new TupleSerializer<>((Class) Tuple2.class, new TypeSerializer[] {LongSerializer.INSTANCE, StringSerializer.INSTANCE})));
        states.add(keyed(StateDescriptor.Type.LIST, "pojos", VoidNamespaceSerializer.INSTANCE, new ListSerializer<>(pojo)));
        states.add(keyed(StateDescriptor.Type.MAP, "enum-by-window", new TimeWindow.Serializer(),
                new MapSerializer<>(new EnumSerializer<>(Color.class), new KryoSerializer<>(Opaque.class, config))));
        states.add(keyed(StateDescriptor.Type.REDUCING, "row", VoidNamespaceSerializer.INSTANCE,
                new RowSerializer(new TypeSerializer[] {IntSerializer.INSTANCE, StringSerializer.INSTANCE})));
        states.add(keyed(StateDescriptor.Type.VALUE, "odd", VoidNamespaceSerializer.INSTANCE, new OddSerializer()));
        states.add(keyed(StateDescriptor.Type.AGGREGATING, "either", VoidNamespaceSerializer.INSTANCE,
                new EitherSerializer<>(NullableSerializer.wrap(LongSerializer.INSTANCE, true),
                        new GenericArraySerializer<>(String.class, StringSerializer.INSTANCE))));
        states.add(keyed(StateDescriptor.Type.VALUE, "string-value", VoidNamespaceSerializer.INSTANCE, new ValueSerializer<>(StringValue.class)));
        states.add(new RegisteredPriorityQueueStateBackendMetaInfo<>("_timer_state/event_window-timers",
                new TimerSerializer<>(StringSerializer.INSTANCE, new TimeWindow.Serializer())).snapshot());

        ByteArrayOutputStream keyed = new ByteArrayOutputStream();
        new KeyedBackendSerializationProxy<>(StringSerializer.INSTANCE, states, false).write(new DataOutputViewStreamWrapper(keyed));
        Files.write(Paths.get(dir, "keyed_meta_many_serializers.bin"), keyed.toByteArray());

        ByteArrayOutputStream unknownKey = new ByteArrayOutputStream();
        new KeyedBackendSerializationProxy<>(new OddSerializer(), states.subList(0, 2), false).write(new DataOutputViewStreamWrapper(unknownKey));
        Files.write(Paths.get(dir, "keyed_meta_unknown_key_serializer.bin"), unknownKey.toByteArray());

        List<StateMetaInfoSnapshot> operatorStates = Arrays.asList(
                new RegisteredOperatorStateBackendMetaInfo<>("offsets", LongSerializer.INSTANCE, OperatorStateHandle.Mode.SPLIT_DISTRIBUTE).snapshot(),
                new RegisteredOperatorStateBackendMetaInfo<>("everyone", BytePrimitiveArraySerializer.INSTANCE, OperatorStateHandle.Mode.UNION).snapshot());
        List<StateMetaInfoSnapshot> broadcastStates = Arrays.asList(
                new RegisteredBroadcastStateBackendMetaInfo<>("rules", OperatorStateHandle.Mode.BROADCAST, StringSerializer.INSTANCE, BooleanSerializer.INSTANCE).snapshot());
        ByteArrayOutputStream operator = new ByteArrayOutputStream();
        new OperatorBackendSerializationProxy(operatorStates, broadcastStates, true).write(new DataOutputViewStreamWrapper(operator));
        Files.write(Paths.get(dir, "operator_meta.bin"), operator.toByteArray());

        // A compressed full snapshot: the proxy, then one Snappy-framed block per non-empty key group,
        // laid out as FullSnapshotAsyncWriter does (kvStateId, key/value pairs, meta-data-follows bit,
        // next kvStateId or 0xFFFF). Key groups 10..13; 11 is empty.
        List<StateMetaInfoSnapshot> two = Arrays.asList(
                keyed(StateDescriptor.Type.VALUE, "count", VoidNamespaceSerializer.INSTANCE, LongSerializer.INSTANCE),
                keyed(StateDescriptor.Type.VALUE, "name", VoidNamespaceSerializer.INSTANCE, StringSerializer.INSTANCE));
        ByteArrayOutputStream full = new ByteArrayOutputStream();
        new KeyedBackendSerializationProxy<>(StringSerializer.INSTANCE, two, true).write(new DataOutputViewStreamWrapper(full));
        StringBuilder expected = new StringBuilder();
        long[] offsets = new long[4];
        for (int kg = 10; kg <= 13; kg++) {
            if (kg == 11) continue;
            offsets[kg - 10] = full.size();
            OutputStream compressed = SnappyStreamCompressionDecorator.INSTANCE.decorateWithCompression(new FilterOutputStream(full) {
                @Override public void close() throws IOException { flush(); }
            });
            DataOutputViewStreamWrapper out = new DataOutputViewStreamWrapper(compressed);
            int entries = kg == 12 ? 3000 : 2;
            long valueBytes = 0;
            for (int state = 0; state < 2; state++) {
                if (state == 0) out.writeShort(0);
                for (int i = 0; i < entries; i++) {
                    byte[] key = ("k" + kg + "-" + i).getBytes(StandardCharsets.UTF_8);
                    byte[] withPrefix = new byte[key.length + 1];
                    withPrefix[0] = (byte) kg;
                    System.arraycopy(key, 0, withPrefix, 1, key.length);
                    byte[] value = (state == 0 ? "v" + i : "name-" + i + "-" + "x".repeat(i % 50)).getBytes(StandardCharsets.UTF_8);
                    boolean last = i == entries - 1;
                    valueBytes += value.length;
                    if (last) {
                        // Per key group and state: entries, total value bytes, last key (without prefix).
                        expected.append(kg).append(' ').append(state).append(' ').append(entries).append(' ').append(valueBytes)
                                .append(' ').append(new String(withPrefix, 1, key.length, StandardCharsets.UTF_8)).append('\n');
                        valueBytes = 0;
                    }
                    if (last) withPrefix[0] |= (byte) 0x80;
                    out.writeInt(withPrefix.length);
                    out.write(withPrefix);
                    out.writeInt(value.length);
                    out.write(value);
                    if (last) out.writeShort(state == 0 ? 1 : 0xFFFF);
                }
            }
            out.flush();
            compressed.close();
        }
        Files.write(Paths.get(dir, "full_snapshot_snappy.bin"), full.toByteArray());
        StringBuilder offs = new StringBuilder();
        for (long o : offsets) offs.append(o).append('\n');
        Files.write(Paths.get(dir, "full_snapshot_snappy.offsets"), offs.toString().getBytes(StandardCharsets.UTF_8));
        Files.write(Paths.get(dir, "full_snapshot_snappy.expected"), expected.toString().getBytes(StandardCharsets.UTF_8));
    }
}
