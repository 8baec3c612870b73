import org.apache.flink.api.common.typeutils.TypeSerializerSnapshotSerializationUtil;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericArrayData;
import org.apache.flink.table.data.GenericMapData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.BooleanType;
import org.apache.flink.table.types.logical.DateType;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.DoubleType;
import org.apache.flink.table.types.logical.FloatType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LocalZonedTimestampType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.MultisetType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.SmallIntType;
import org.apache.flink.table.types.logical.TimeType;
import org.apache.flink.table.types.logical.TimestampType;
import org.apache.flink.table.types.logical.TinyIntType;
import org.apache.flink.table.types.logical.VarBinaryType;
import org.apache.flink.table.types.logical.VarCharType;
import org.apache.flink.types.RowKind;

import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Flink's own RowDataSerializer on rows of many SQL types: prints one JSON object with the serializer
 * snapshot (as written into state meta data) and each sample row's bytes, hex. See
 * tests/formats/flink/test_row_data_samples.py for the values.
 */
public class RowDataSamples {
    public static void main(String[] args) throws Exception {
        LogicalType[] types = {
            new BooleanType(), new TinyIntType(), new SmallIntType(), new IntType(), new BigIntType(),
            new FloatType(), new DoubleType(), new DecimalType(10, 2), new DecimalType(30, 5),
            new VarCharType(VarCharType.MAX_LENGTH), new VarBinaryType(VarBinaryType.MAX_LENGTH), new DateType(),
            new TimeType(3), new TimestampType(3), new TimestampType(9), new LocalZonedTimestampType(6),
            RowType.of(new LogicalType[] {new IntType(), new VarCharType(VarCharType.MAX_LENGTH)}, new String[] {"a", "b"}),
            new ArrayType(new SmallIntType()), new MapType(new IntType(), new VarCharType(VarCharType.MAX_LENGTH)),
            new MultisetType(new VarCharType(VarCharType.MAX_LENGTH)), new ArrayType(new ArrayType(new IntType())),
        };
        Map<Object, Object> byNumber = new LinkedHashMap<>();
        byNumber.put(7, StringData.fromString("seven"));
        byNumber.put(-1, StringData.fromString("a value longer than seven bytes"));
        Map<Object, Object> bag = new LinkedHashMap<>();
        bag.put(StringData.fromString("x"), 2);
        bag.put(StringData.fromString("ünï"), 1);
        RowDataSerializer serializer = new RowDataSerializer(types);
        DataOutputSerializer snapshot = new DataOutputSerializer(256);
        writeSnapshot(snapshot, serializer);
        GenericRowData full = GenericRowData.ofKind(RowKind.UPDATE_AFTER,
                true, (byte) -7, (short) -300, 123456, -9007199254740993L, 1.5f, -2.25,
                DecimalData.fromBigDecimal(new BigDecimal("-12345678.91"), 10, 2),
                DecimalData.fromBigDecimal(new BigDecimal("1234567890123456789012345.67891"), 30, 5),
                StringData.fromString("short"), new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9}, 20454, 45296789,
                TimestampData.fromEpochMillis(1767225600123L), TimestampData.fromEpochMillis(1767225600123L, 456789),
                TimestampData.fromEpochMillis(-1000L, 1000), GenericRowData.of(42, StringData.fromString("zoë and a longer text")),
                new GenericArrayData(new Object[] {(short) 1, null, (short) -3}), new GenericMapData(byNumber), new GenericMapData(bag),
                new GenericArrayData(new Object[] {new GenericArrayData(new int[] {1, 2}), new GenericArrayData(new int[0]), null}));
        GenericRowData nulls = new GenericRowData(RowKind.DELETE, types.length);
        nulls.setField(9, StringData.fromString("ünïcode, more than seven bytes"));
        nulls.setField(10, new byte[] {-1});
        System.out.print("{\"snapshot\": \"" + hex(snapshot.getCopyOfBuffer()) + "\", \"rows\": [");
        String sep = "";
        for (GenericRowData row : new GenericRowData[] {full, nulls}) {
            DataOutputSerializer out = new DataOutputSerializer(256);
            serializer.serialize(row, out);
            System.out.print(sep + "\"" + hex(out.getCopyOfBuffer()) + "\"");
            sep = ", ";
        }
        System.out.println("]}");
    }

    /**
     * TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot in the one form this release has
     * (javap): (out, snapshot) in 1.20.3, 2.0.2, 2.1.1 and 2.3.0; (out, snapshot, serializer) in 1.15.4.
     */
    private static void writeSnapshot(DataOutputSerializer out, RowDataSerializer serializer) throws Exception {
        for (Method method : TypeSerializerSnapshotSerializationUtil.class.getMethods()) {
            if (!method.getName().equals("writeSerializerSnapshot")) {
                continue;
            }
            if (method.getParameterCount() == 2) {
                method.invoke(null, out, serializer.snapshotConfiguration());
            } else {
                method.invoke(null, out, serializer.snapshotConfiguration(), serializer);
            }
            return;
        }
        throw new IllegalStateException("no TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot");
    }

    private static String hex(byte[] data) {
        StringBuilder out = new StringBuilder();
        for (byte b : data) {
            out.append(String.format("%02x", b));
        }
        return out.toString();
    }
}
