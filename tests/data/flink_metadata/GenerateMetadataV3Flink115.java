import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.FinishedOperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.FullyFinishedOperatorState;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.StateObjectCollection;
import org.apache.flink.runtime.checkpoint.channel.InputChannelInfo;
import org.apache.flink.runtime.checkpoint.channel.ResultSubpartitionInfo;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.checkpoint.metadata.MetadataV3Serializer;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.InputChannelStateHandle;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.ResultSubpartitionStateHandle;
import org.apache.flink.runtime.state.StateHandleID;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateHandleStreamImpl;
import org.apache.flink.runtime.state.changelog.SequenceNumber;
import org.apache.flink.runtime.state.changelog.StateChange;
import org.apache.flink.runtime.state.changelog.inmemory.InMemoryChangelogStateHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Writes a metadata version 3 file with Flink 1.15.4's own MetadataV3Serializer: changelog handles under
 * the codes 8, 9 and 10 (their 1.15 layout), the map-based shared/private state of 1.15's incremental
 * handle, channel state with a subtask index, and finished operators and subtasks. Not part of the build:
 *
 *   javac -cp flink-dist-1.15.4.jar -d /tmp/gen115 GenerateMetadataV3Flink115.java
 *   java -cp flink-dist-1.15.4.jar:/tmp/gen115 GenerateMetadataV3Flink115 tests/data/flink_metadata
 */
public class GenerateMetadataV3Flink115 {
    static final String BASE = "file:/var/lib/flink/checkpoints/fedcba9876543210fedcba9876543210";

    static StreamStateHandle file(String name, long size) {
        return new FileStateHandle(new Path(BASE + "/" + name), size);
    }

    public static void main(String[] args) throws Exception {
        Map<StateHandleID, StreamStateHandle> shared = new LinkedHashMap<>();
        shared.put(new StateHandleID("000009.sst"), file("shared/sst-9", 3000));
        Map<StateHandleID, StreamStateHandle> priv = new LinkedHashMap<>();
        priv.put(new StateHandleID("CURRENT"), new ByteStreamStateHandle(BASE + "/shared/current", "MANIFEST-000005\n".getBytes()));
        IncrementalRemoteKeyedStateHandle incremental = new IncrementalRemoteKeyedStateHandle(
                UUID.fromString("0f0e0d0c-0b0a-4908-8706-050403020100"), KeyGroupRange.of(0, 63), 11L, shared, priv,
                new ByteStreamStateHandle(BASE + "/chk-11/meta", new byte[] {6, 6}), 777L);

        List<KeyedStateHandle> materialized = new ArrayList<>();
        materialized.add(incremental);
        List<ChangelogStateHandle> nonMaterialized = new ArrayList<>();
        nonMaterialized.add(new InMemoryChangelogStateHandle(
                Collections.singletonList(new StateChange(3, new byte[] {1})),
                SequenceNumber.of(4L), SequenceNumber.of(5L), KeyGroupRange.of(0, 63)));
        List<Tuple2<StreamStateHandle, Long>> files = new ArrayList<>();
        files.add(Tuple2.of(file("dstl/part-1", 90), 12L));
        nonMaterialized.add(new ChangelogStateHandleStreamImpl(files, KeyGroupRange.of(0, 63), 90L, 80L));
        ChangelogStateBackendHandle changelog = new ChangelogStateBackendHandle.ChangelogStateBackendHandleImpl(
                materialized, nonMaterialized, KeyGroupRange.of(0, 63), 2L, 1000L);

        OperatorState op = new OperatorState(new OperatorID(11L, 12L), 2, 128);
        op.putState(0, OperatorSubtaskState.builder()
                .setManagedKeyedState(changelog)
                .setInputChannelState(new StateObjectCollection<>(Collections.singletonList(new InputChannelStateHandle(
                        0, new InputChannelInfo(2, 3), file("chk-11/channel-in", 40), Arrays.asList(0L, 20L), 40L))))
                .setResultSubpartitionState(new StateObjectCollection<>(Collections.singletonList(new ResultSubpartitionStateHandle(
                        0, new ResultSubpartitionInfo(4, 5), file("chk-11/channel-out", 30), Collections.singletonList(0L), 30L))))
                .build());
        op.putState(1, FinishedOperatorSubtaskState.INSTANCE);
        List<OperatorState> ops = Arrays.asList(op, new FullyFinishedOperatorState(new OperatorID(13L, 14L), 1, 128));

        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeInt(0x4960672D);
        out.writeInt(MetadataV3Serializer.VERSION);
        MetadataV3Serializer.INSTANCE.serialize(new CheckpointMetadata(11L, ops, Collections.emptyList()), out);
        out.flush();
        Files.write(Paths.get(args[0], "v3_flink115_changelog_channels.bin"), bytes.toByteArray());
    }
}
