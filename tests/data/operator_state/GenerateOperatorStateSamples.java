import org.apache.flink.api.common.ExecutionConfig;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeutils.base.BooleanSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.core.fs.CloseableRegistry;
import org.apache.flink.runtime.checkpoint.CheckpointOptions;
import org.apache.flink.runtime.state.DefaultOperatorStateBackend;
import org.apache.flink.runtime.state.DefaultOperatorStateBackendBuilder;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.SnapshotResult;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;
import org.apache.flink.runtime.state.memory.MemCheckpointStreamFactory;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.RunnableFuture;

/**
 * Writes operator state files with Flink's own DefaultOperatorStateBackend (flink-dist 1.18.1 and 2.1.1): split
 * and union list states, broadcast states, an empty list, an element larger than one Snappy chunk;
 * once uncompressed and once with snapshot compression. Per sample: the state file (.bin), the handle's
 * per-state distribution mode and partition offsets (.handle: name, mode, offsets), and the values put
 * in (.expected.json; byte arrays as size and SHA-256). 1.18 writes one Snappy stream per state, 1.20+ one
 * stream for all states. Not part of the build: run by hand with each version's jars, output committed:
 *
 *   javac -cp flink-dist-VERSION.jar -d /tmp/gen GenerateOperatorStateSamples.java
 *   java -cp 'lib/*:/tmp/gen' GenerateOperatorStateSamples tests/data/operator_state VERSION
 */
public class GenerateOperatorStateSamples {
    static final List<Long> OFFSETS = Arrays.asList(42L, -7L, 1L << 40);
    static final List<String> EVERYONE = Arrays.asList("a", "j\u00fcrgen", "", "emoji-\uD83D\uDE00");

    static byte[] blob(int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) b[i] = (byte) ((i * 31 + i / 7) & 0xFF);
        return b;
    }

    static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\');
            out.append(c);
        }
        return out.append('"').toString();
    }

    static String sha256(byte[] b) throws Exception {
        StringBuilder out = new StringBuilder();
        for (byte x : MessageDigest.getInstance("SHA-256").digest(b)) out.append(String.format("%02x", x));
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        String dir = args[0];
        String version = args[1];
        for (boolean compressed : new boolean[] {false, true}) {
            ExecutionConfig config = new ExecutionConfig();
            config.setUseSnapshotCompression(compressed);
            DefaultOperatorStateBackend backend = new DefaultOperatorStateBackendBuilder(
                    GenerateOperatorStateSamples.class.getClassLoader(), config, false, Collections.emptyList(), new CloseableRegistry()).build();

            ListState<Long> offsets = backend.getListState(new ListStateDescriptor<>("offsets", LongSerializer.INSTANCE));
            offsets.update(OFFSETS);
            ListState<String> everyone = backend.getUnionListState(new ListStateDescriptor<>("everyone", StringSerializer.INSTANCE));
            everyone.update(EVERYONE);
            List<byte[]> blobs = Arrays.asList(blob(70_000), blob(3));
            ListState<byte[]> blobState = backend.getListState(new ListStateDescriptor<>("blobs", BytePrimitiveArraySerializer.INSTANCE));
            blobState.update(blobs);
            backend.getListState(new ListStateDescriptor<>("nothing-yet", LongSerializer.INSTANCE));
            Map<String, Long> rules = new TreeMap<>();
            rules.put("x", 1L);
            rules.put("rule-\u00e9", -2L);
            BroadcastState<String, Long> rulesState = backend.getBroadcastState(
                    new MapStateDescriptor<>("rules", StringSerializer.INSTANCE, LongSerializer.INSTANCE));
            for (Map.Entry<String, Long> e : rules.entrySet()) rulesState.put(e.getKey(), e.getValue());
            backend.getBroadcastState(new MapStateDescriptor<>("no-rules", StringSerializer.INSTANCE, BooleanSerializer.INSTANCE));

            RunnableFuture<SnapshotResult<OperatorStateHandle>> future = backend.snapshot(
                    1L, 1L, new MemCheckpointStreamFactory(16 << 20), CheckpointOptions.forCheckpointWithDefaultLocation());
            future.run();
            OperatorStateHandle handle = future.get().getJobManagerOwnedSnapshot();
            byte[] data = ((ByteStreamStateHandle) handle.getDelegateStateHandle()).getData();
            String name = "flink-" + version + (compressed ? "-snappy" : "");
            Files.write(Paths.get(dir, name + ".bin"), data);

            StringBuilder lines = new StringBuilder();
            for (Map.Entry<String, OperatorStateHandle.StateMetaInfo> e : handle.getStateNameToPartitionOffsets().entrySet()) {
                lines.append(e.getKey()).append('\t').append(e.getValue().getDistributionMode());
                for (long o : e.getValue().getOffsets()) lines.append('\t').append(o);
                lines.append('\n');
            }
            Files.write(Paths.get(dir, name + ".handle"), lines.toString().getBytes(StandardCharsets.UTF_8));

            List<String> blobHex = new ArrayList<>();
            for (byte[] b : blobs) blobHex.add("{\"size\": " + b.length + ", \"sha256\": " + quote(sha256(b)) + "}");
            List<String> everyoneJson = new ArrayList<>();
            for (String s : EVERYONE) everyoneJson.add(quote(s));
            List<String> rulesJson = new ArrayList<>();
            for (Map.Entry<String, Long> e : rules.entrySet()) rulesJson.add(quote(e.getKey()) + ": " + e.getValue());
            String expected = "{\"offsets\": " + OFFSETS + ", \"everyone\": [" + String.join(", ", everyoneJson)
                    + "], \"blobs\": [" + String.join(", ", blobHex) + "], \"nothing-yet\": [], \"rules\": {"
                    + String.join(", ", rulesJson) + "}, \"no-rules\": {}}\n";
            Files.write(Paths.get(dir, name + ".expected.json"), expected.getBytes(StandardCharsets.UTF_8));
            backend.dispose();
        }
    }
}
