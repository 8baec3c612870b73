import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.java.typeutils.runtime.RowSerializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

/**
 * Prints values serialized by Flink's own serializers, so the Python decoders in
 * repair/formats/flink/values.py can be checked against the real jar (tests/formats/flink/test_serializer_samples.py)
 * for formats the fixtures do not hold: every RowKind, legacy Rows (no kind), and Sets (Flink 2.x).
 *
 * <pre>
 *   javac -cp flink-dist.jar -d out SerializerSamples.java
 *   java -cp flink-dist.jar:out SerializerSamples
 * </pre>
 *
 * <p>Prints a JSON array of {"name": ..., "hex": ...}; the test knows each sample's value by its name.
 * A sample whose serializer this Flink lacks (SetSerializer before 2.0) is left out.
 */
public final class SerializerSamples {
    private static final List<String> LINES = new ArrayList<>();

    private SerializerSamples() {}

    public static void main(String[] args) throws Exception {
        TypeSerializer<?>[] fields = {LongSerializer.INSTANCE, StringSerializer.INSTANCE, LongSerializer.INSTANCE};
        // the third argument is supportsRowKind: false is the legacy format (no kind bits, before Flink 1.11)
        RowSerializer withKinds = new RowSerializer(fields, null, true);
        RowSerializer legacy = new RowSerializer(fields, null, false);
        for (RowKind kind : RowKind.values()) {
            add("row " + kind.shortString(), withKinds, Row.ofKind(kind, 7L, "héllo", -1L));
        }
        add("row +I nulls", withKinds, Row.ofKind(RowKind.INSERT, null, null, Long.MIN_VALUE));
        add("legacy row", legacy, Row.of(7L, "héllo", -1L));
        add("legacy row nulls", legacy, Row.of(null, "x", null));

        TypeSerializer<Set<String>> sets = setSerializer();
        if (sets != null) {
            Set<String> set = new LinkedHashSet<>();
            set.add("a");
            set.add(null);
            set.add("ünï");
            add("set", sets, set);
            add("set empty", sets, new LinkedHashSet<>());
        }
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8.name());
        out.println("[" + String.join(",\n", LINES) + "]");
    }

    @SuppressWarnings("unchecked")
    private static TypeSerializer<Set<String>> setSerializer() throws Exception {
        try {
            Class<?> type = Class.forName("org.apache.flink.api.common.typeutils.base.SetSerializer");
            return (TypeSerializer<Set<String>>) type.getConstructor(TypeSerializer.class).newInstance(StringSerializer.INSTANCE);
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    @SuppressWarnings("unchecked")
    private static <T> void add(String name, TypeSerializer<T> serializer, Object value) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(64);
        serializer.serialize((T) value, out);
        StringBuilder hex = new StringBuilder();
        for (byte b : out.getCopyOfBuffer()) {
            hex.append(String.format("%02x", b & 0xFF));
        }
        LINES.add("{\"name\": \"" + name + "\", \"hex\": \"" + hex + "\"}");
    }
}
