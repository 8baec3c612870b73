import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.fs.Path;
import org.apache.flink.runtime.checkpoint.CheckpointProperties;
import org.apache.flink.runtime.checkpoint.CheckpointRetentionPolicy;
import org.apache.flink.runtime.checkpoint.FinishedOperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.FullyFinishedOperatorState;
import org.apache.flink.runtime.checkpoint.MasterState;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.channel.InputChannelInfo;
import org.apache.flink.runtime.checkpoint.channel.ResultSubpartitionInfo;
import org.apache.flink.runtime.checkpoint.filemerging.LogicalFile;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.checkpoint.metadata.MetadataSerializer;
import org.apache.flink.runtime.checkpoint.metadata.MetadataV3Serializer;
import org.apache.flink.runtime.checkpoint.metadata.MetadataV4Serializer;
import org.apache.flink.runtime.checkpoint.metadata.MetadataV5Serializer;
import org.apache.flink.runtime.checkpoint.metadata.MetadataV6Serializer;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.CheckpointedStateScope;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle.HandleAndLocalPath;
import org.apache.flink.runtime.state.IncrementalRemoteKeyedStateHandle;
import org.apache.flink.runtime.state.InputChannelStateHandle;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeOffsets;
import org.apache.flink.runtime.state.KeyGroupsSavepointStateHandle;
import org.apache.flink.runtime.state.KeyGroupsStateHandle;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.MergedInputChannelStateHandle;
import org.apache.flink.runtime.state.MergedResultSubpartitionStateHandle;
import org.apache.flink.runtime.state.OperatorStateHandle;
import org.apache.flink.runtime.state.OperatorStreamStateHandle;
import org.apache.flink.runtime.state.ResultSubpartitionStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateBackendHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateHandle;
import org.apache.flink.runtime.state.changelog.ChangelogStateHandleStreamImpl;
import org.apache.flink.runtime.state.changelog.SequenceNumber;
import org.apache.flink.runtime.state.changelog.StateChange;
import org.apache.flink.runtime.state.changelog.inmemory.InMemoryChangelogStateHandle;
import org.apache.flink.runtime.state.filemerging.DirectoryStreamStateHandle;
import org.apache.flink.runtime.state.filemerging.EmptySegmentFileStateHandle;
import org.apache.flink.runtime.state.filemerging.FileMergingOperatorStreamStateHandle;
import org.apache.flink.runtime.state.filemerging.SegmentFileStateHandle;
import org.apache.flink.runtime.state.filesystem.FileStateHandle;
import org.apache.flink.runtime.state.filesystem.RelativeFileStateHandle;
import org.apache.flink.runtime.state.memory.ByteStreamStateHandle;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.nio.charset.StandardCharsets;
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
 * Writes small _metadata files with Flink's own MetadataV3..V6 serializers (flink-dist 2.1.1), covering
 * the handle types the fixture jobs do not produce (changelog, file merging, channel state, finished
 * operators, master and coordinator state). Not part of the build: run by hand, output committed:
 *
 *   javac -cp flink-dist-2.1.1.jar -d /tmp/gen GenerateMetadataSamples.java
 *   java -cp flink-dist-2.1.1.jar:/tmp/gen GenerateMetadataSamples tests/data/flink_metadata
 *
 * It also writes expected.txt: one line per file with the facts the Python test checks.
 */
public class GenerateMetadataSamples {
    static final String BASE = "file:/var/lib/flink/checkpoints/0123456789abcdef0123456789abcdef";

    static ByteStreamStateHandle inline(String name, String text) {
        return new ByteStreamStateHandle(BASE + "/" + name, text.getBytes(StandardCharsets.UTF_8));
    }

    static StreamStateHandle file(String name, long size) {
        return new FileStateHandle(new Path(BASE + "/" + name), size);
    }

    static StreamStateHandle relative(String name, long size) {
        return new RelativeFileStateHandle(new Path(BASE + "/chk-7/" + name), name, size);
    }

    static OperatorStateHandle operatorHandle(StreamStateHandle delegate) {
        Map<String, OperatorStateHandle.StateMetaInfo> states = new LinkedHashMap<>();
        states.put("split-state", new OperatorStateHandle.StateMetaInfo(new long[] {0L, 17L}, OperatorStateHandle.Mode.SPLIT_DISTRIBUTE));
        states.put("union-state", new OperatorStateHandle.StateMetaInfo(new long[] {33L}, OperatorStateHandle.Mode.UNION));
        states.put("broadcast-state", new OperatorStateHandle.StateMetaInfo(new long[] {}, OperatorStateHandle.Mode.BROADCAST));
        return new OperatorStreamStateHandle(states, delegate);
    }

    static IncrementalRemoteKeyedStateHandle incremental(int start, int end) {
        List<HandleAndLocalPath> shared = new ArrayList<>();
        shared.add(HandleAndLocalPath.of(file("shared/6f1c0a4e-sst", 4096), "000012.sst"));
        shared.add(HandleAndLocalPath.of(inline("shared/small-sst", "tiny sst"), "000013.sst"));
        List<HandleAndLocalPath> priv = new ArrayList<>();
        priv.add(HandleAndLocalPath.of(inline("shared/current", "MANIFEST-000004\n"), "CURRENT"));
        priv.add(HandleAndLocalPath.of(file("shared/manifest", 2048), "MANIFEST-000004"));
        return new IncrementalRemoteKeyedStateHandle(
                UUID.fromString("3f2a1b4c-5d6e-4f70-8192-a3b4c5d6e7f8"), KeyGroupRange.of(start, end), 7L,
                shared, priv, inline("chk-7/meta", "meta bytes"), 1234L);
    }

    static KeyGroupsStateHandle keyGroups(int start, int end, StreamStateHandle delegate) {
        long[] offsets = new long[end - start + 1];
        for (int i = 0; i < offsets.length; i++) offsets[i] = i == 1 ? 0L : 100L + i;
        return new KeyGroupsStateHandle(new KeyGroupRangeOffsets(KeyGroupRange.of(start, end), offsets), delegate);
    }

    static OperatorSubtaskState fullSubtask(int index, boolean merged, boolean segments) {
        OperatorSubtaskState.Builder b = OperatorSubtaskState.builder();
        b.setManagedOperatorState(operatorHandle(inline("chk-7/op-" + index, "operator state")));
        if (segments) {
            Map<String, OperatorStateHandle.StateMetaInfo> states = new LinkedHashMap<>();
            states.put("merged-state", new OperatorStateHandle.StateMetaInfo(new long[] {5L}, OperatorStateHandle.Mode.SPLIT_DISTRIBUTE));
            b.setRawOperatorState(new FileMergingOperatorStreamStateHandle(
                    DirectoryStreamStateHandle.of(new Path(BASE + "/taskowned/tm-1")),
                    DirectoryStreamStateHandle.of(new Path(BASE + "/shared/job_x_op_y_0_2")),
                    states,
                    new SegmentFileStateHandle(new Path(BASE + "/shared/job_x_op_y_0_2/seg-1"), 128L, 64L,
                            CheckpointedStateScope.SHARED, new LogicalFile.LogicalFileId("logical-1"))));
        } else {
            b.setRawOperatorState(operatorHandle(relative("raw-op-" + index, 99L)));
        }
        b.setManagedKeyedState(incremental(index * 64, index * 64 + 63));
        b.setRawKeyedState(keyGroups(index * 64, index * 64 + 3, segments ? EmptySegmentFileStateHandle.INSTANCE : file("chk-7/timers-" + index, 512)));
        List<InputChannelStateHandle> in = new ArrayList<>();
        in.add(new InputChannelStateHandle(index, new InputChannelInfo(0, 1), inline("chk-7/in-" + index, "in-flight"), Arrays.asList(0L, 4L), 9L));
        in.add(new InputChannelStateHandle(index, new InputChannelInfo(1, 0), keyGroups(0, 0, file("chk-7/odd", 10)), Collections.singletonList(0L), 10L));
        List<ResultSubpartitionStateHandle> out = new ArrayList<>();
        out.add(new ResultSubpartitionStateHandle(index, new ResultSubpartitionInfo(0, 2), file("chk-7/out-" + index, 300), Arrays.asList(0L, 100L, 200L), 300L));
        if (merged) {
            b.setInputChannelState(new org.apache.flink.runtime.checkpoint.StateObjectCollection<>(
                    Arrays.asList(in.get(0), MergedInputChannelStateHandle.fromChannelHandles(Collections.singletonList(in.get(1))))));
            b.setResultSubpartitionState(new org.apache.flink.runtime.checkpoint.StateObjectCollection<>(
                    Collections.singletonList(MergedResultSubpartitionStateHandle.fromChannelHandles(out))));
        } else {
            b.setInputChannelState(new org.apache.flink.runtime.checkpoint.StateObjectCollection<>(new ArrayList<>(in)));
            b.setResultSubpartitionState(new org.apache.flink.runtime.checkpoint.StateObjectCollection<>(new ArrayList<>(out)));
        }
        return b.build();
    }

    static OperatorSubtaskState changelogSubtask() {
        List<KeyedStateHandle> materialized = new ArrayList<>();
        materialized.add(incremental(0, 127));
        List<ChangelogStateHandle> nonMaterialized = new ArrayList<>();
        nonMaterialized.add(new InMemoryChangelogStateHandle(
                Arrays.asList(StateChange.ofMetadataChange(new byte[] {1, 2}), StateChange.ofDataChange(5, new byte[] {9, 8, 7})),
                SequenceNumber.of(10L), SequenceNumber.of(12L), KeyGroupRange.of(0, 127)));
        List<Tuple2<StreamStateHandle, Long>> files = new ArrayList<>();
        files.add(Tuple2.of(file("changelog/dstl-1", 700), 0L));
        files.add(Tuple2.of(file("changelog/dstl-1", 700), 350L));
        nonMaterialized.add(new ChangelogStateHandleStreamImpl(files, KeyGroupRange.of(0, 127), 700L, 650L, "filesystem"));
        ChangelogStateBackendHandle handle = new ChangelogStateBackendHandle.ChangelogStateBackendHandleImpl(
                materialized, nonMaterialized, KeyGroupRange.of(0, 127), 7L, 3L, 5555L);
        return OperatorSubtaskState.builder().setManagedKeyedState(handle).build();
    }

    static OperatorSubtaskState savepointSubtask() {
        long[] offsets = {0L, 41L};
        return OperatorSubtaskState.builder()
                .setManagedKeyedState(new KeyGroupsSavepointStateHandle(
                        new KeyGroupRangeOffsets(KeyGroupRange.of(126, 127), offsets), relative("savepoint-data", 82L)))
                .build();
    }

    static CheckpointMetadata build(int version) {
        boolean v5 = version >= 5;
        List<OperatorState> ops = new ArrayList<>();
        OperatorState main = new OperatorState(v5 ? "main-op" : null, v5 ? "main-uid" : null,
                new OperatorID(0x0102030405060708L, 0x1112131415161718L), 3, 128);
        main.setCoordinatorState(new ByteStreamStateHandle("coordinator", new byte[] {1, 2, 3, 4}));
        main.putState(0, fullSubtask(0, version >= 6, version >= 6));
        main.putState(1, fullSubtask(1, false, false));
        main.putState(2, FinishedOperatorSubtaskState.INSTANCE);
        ops.add(main);
        ops.add(new FullyFinishedOperatorState(v5 ? "finished-op" : null, null, new OperatorID(5L, 6L), 2, 256));
        OperatorState changelog = new OperatorState(null, v5 ? "changelog-uid" : null, new OperatorID(-1L, 42L), 1, 128);
        changelog.putState(0, changelogSubtask());
        ops.add(changelog);
        OperatorState savepoint = new OperatorState(v5 ? "n\u00e4me \u00fcnicode \ud83d\ude00" : null, null, new OperatorID(7L, 8L), 2, 128);
        savepoint.putState(1, savepointSubtask());
        ops.add(savepoint);
        List<MasterState> masters = Arrays.asList(
                new MasterState("hook-a", new byte[] {10, 20, 30}, 1), new MasterState("hook-b", new byte[0], 2));
        return new CheckpointMetadata(42L, ops, masters);
    }

    static byte[] write(MetadataSerializer serializer, CheckpointMetadata metadata) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeInt(0x4960672D);
        out.writeInt(serializer.getVersion());
        serializer.serialize(metadata, out);
        out.flush();
        return bytes.toByteArray();
    }

    public static void main(String[] args) throws Exception {
        String dir = args[0];
        StringBuilder expected = new StringBuilder();
        Object[][] samples = {
            {"v3_handles.bin", MetadataV3Serializer.INSTANCE, 3, null, "none"},
            {"v4_checkpoint.bin", MetadataV4Serializer.INSTANCE, 4,
                CheckpointProperties.forCheckpoint(CheckpointRetentionPolicy.RETAIN_ON_CANCELLATION), "checkpoint"},
            {"v4_savepoint_native.bin", MetadataV4Serializer.INSTANCE, 4,
                CheckpointProperties.forSavepoint(true, SavepointFormatType.NATIVE), "savepoint"},
            {"v5_terminate_savepoint.bin", MetadataV5Serializer.INSTANCE, 5,
                CheckpointProperties.forSyncSavepoint(false, true, SavepointFormatType.CANONICAL), "savepoint"},
            {"v5_suspend_savepoint.bin", MetadataV5Serializer.INSTANCE, 5,
                CheckpointProperties.forSyncSavepoint(true, false, SavepointFormatType.CANONICAL), "savepoint"},
            {"v6_unclaimed.bin", MetadataV6Serializer.INSTANCE, 6, CheckpointProperties.forUnclaimedSnapshot(), "checkpoint"},
        };
        for (Object[] s : samples) {
            int version = (Integer) s[2];
            CheckpointMetadata metadata = build(version);
            if (s[3] != null) metadata = metadata.withProperties((CheckpointProperties) s[3]);
            Files.write(Paths.get(dir, (String) s[0]), write((MetadataSerializer) s[1], metadata));
            expected.append(s[0]).append(' ').append(version).append(' ');
            if (s[3] != null) {
                CheckpointProperties p = (CheckpointProperties) s[3];
                expected.append(p.getCheckpointType().getName().replace(' ', '_')).append(' ')
                        .append(p.isSavepoint()).append(' ')
                        .append(p.getCheckpointType().getSharingFilesStrategy()).append(' ')
                        .append(p.isUnclaimed());
                if (p.getCheckpointType() instanceof org.apache.flink.runtime.checkpoint.SavepointType) {
                    expected.append(' ').append(((org.apache.flink.runtime.checkpoint.SavepointType) p.getCheckpointType()).getFormatType());
                }
            }
            expected.append('\n');
        }
        Files.write(Paths.get(dir, "expected.txt"), expected.toString().getBytes(StandardCharsets.UTF_8));

        // A general Java serialization stream for the stream-protocol reader: a list with a repeated
        // string (back reference), boxed numbers, arrays, an enum, null, a map and a nested list.
        java.util.ArrayList<Object> list = new java.util.ArrayList<>();
        String shared = "shared-\u00e9";
        list.add(shared);
        list.add(shared);
        list.add(42);
        list.add(Long.MIN_VALUE);
        list.add(new int[] {1, -2, 3});
        list.add(new byte[] {7, 8, 9});
        list.add(java.util.concurrent.TimeUnit.SECONDS);
        list.add(null);
        java.util.HashMap<String, Object> map = new java.util.HashMap<>();
        map.put("key", 2.5d);
        list.add(map);
        list.add(new java.util.ArrayList<>(Arrays.asList("x", java.util.concurrent.TimeUnit.SECONDS)));
        ByteArrayOutputStream javaBytes = new ByteArrayOutputStream();
        try (java.io.ObjectOutputStream out = new java.io.ObjectOutputStream(javaBytes)) {
            out.writeObject(list);
        }
        Files.write(Paths.get(dir, "java_objects.bin"), javaBytes.toByteArray());

        // The rarer parts of the protocol: primitive fields of every type, an Externalizable object
        // (block data), a dynamic proxy (TC_PROXYCLASSDESC), a class object (TC_CLASS) and a string
        // longer than 65535 bytes (TC_LONGSTRING).
        Object proxy = java.lang.reflect.Proxy.newProxyInstance(
                GenerateMetadataSamples.class.getClassLoader(), new Class<?>[] {Runnable.class, java.io.Serializable.class}, new Handler());
        java.util.ArrayList<Object> rare = new java.util.ArrayList<>(Arrays.asList(new Prims(), new Ext(), proxy, String.class, "L".repeat(70000)));
        ByteArrayOutputStream rareBytes = new ByteArrayOutputStream();
        try (java.io.ObjectOutputStream out = new java.io.ObjectOutputStream(rareBytes)) {
            out.writeObject(rare);
        }
        Files.write(Paths.get(dir, "java_objects_rare.bin"), rareBytes.toByteArray());
    }

    static final class Prims implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        byte b = -5;
        char c = '\u00e9';
        short s = -300;
        int i = 70000;
        long l = 1L << 40;
        float f = 1.5f;
        double d = -0.25;
        boolean z = true;
        String text = "prims";
    }

    static final class Ext implements java.io.Externalizable {
        public Ext() {}
        public void writeExternal(java.io.ObjectOutput out) throws java.io.IOException {
            out.writeInt(12345);
            out.writeUTF("external");
        }
        public void readExternal(java.io.ObjectInput in) {}
    }

    static final class Handler implements java.lang.reflect.InvocationHandler, java.io.Serializable {
        private static final long serialVersionUID = 1L;
        public Object invoke(Object proxy, java.lang.reflect.Method method, Object[] args) { return null; }
    }
}
