package benchspa;

import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.avro.Schema;
import org.apache.avro.SchemaBuilder;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.flink.api.common.typeinfo.BasicTypeInfo;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.CompositeType;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.typeutils.EnumTypeInfo;
import org.apache.flink.api.java.typeutils.ListTypeInfo;
import org.apache.flink.api.java.typeutils.MapTypeInfo;
import org.apache.flink.api.java.typeutils.PojoTypeInfo;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.api.java.typeutils.TupleTypeInfo;
import org.apache.flink.types.Row;

/**
 * The Avro schema and records of the rows a state gives, for Parquet through flink-parquet's Avro
 * writer: the columns {@code repair export} writes for the state as far as the State Processor API's
 * objects allow ({@code key}, {@code user_key} for map state, {@code value}, {@code list_index} for list
 * state), the value typed as export types it (docs/commands/export.md, "Columns"): a POJO, Tuple or
 * Row a record ({@code kind} + {@code f0..} for a Row), a List an array, a Map a map, an enum or a
 * char a string, byte[] bytes. Avro has no 8- or 16-bit integers: Byte and Short are Avro ints (Parquet
 * INT32 without export's INT(8)/INT(16) annotation). Every field is nullable, as export's columns are.
 */
final class AvroRows {
    private AvroRows() {}

    /** The schema of a state's rows: {@code userKey} null unless map state. */
    static Schema rowSchema(TypeInformation<?> key, TypeInformation<?> userKey, TypeInformation<?> value, boolean list) {
        SchemaBuilder.FieldAssembler<Schema> fields = SchemaBuilder.record("row").fields();
        fields = fields.name("key").type(nullable(schema(key, "key"))).withDefault(null);
        if (userKey != null) {
            fields = fields.name("user_key").type(nullable(schema(userKey, "user_key"))).withDefault(null);
        }
        fields = fields.name("value").type(nullable(schema(value, "value"))).withDefault(null);
        if (list) {
            fields = fields.name("list_index").type(nullable(Schema.create(Schema.Type.INT))).withDefault(null);
        }
        return fields.endRecord();
    }

    private static Schema nullable(Schema schema) {
        return Schema.createUnion(Schema.create(Schema.Type.NULL), schema);
    }

    /** The Avro type of a Flink type; {@code name} names its records uniquely within the row. */
    static Schema schema(TypeInformation<?> type, String name) {
        if (type.equals(BasicTypeInfo.STRING_TYPE_INFO) || type.equals(BasicTypeInfo.CHAR_TYPE_INFO) || type instanceof EnumTypeInfo) {
            return Schema.create(Schema.Type.STRING);
        }
        if (type.equals(BasicTypeInfo.LONG_TYPE_INFO)) {
            return Schema.create(Schema.Type.LONG);
        }
        if (type.equals(BasicTypeInfo.INT_TYPE_INFO) || type.equals(BasicTypeInfo.SHORT_TYPE_INFO) || type.equals(BasicTypeInfo.BYTE_TYPE_INFO)) {
            return Schema.create(Schema.Type.INT);
        }
        if (type.equals(BasicTypeInfo.BOOLEAN_TYPE_INFO)) {
            return Schema.create(Schema.Type.BOOLEAN);
        }
        if (type.equals(BasicTypeInfo.DOUBLE_TYPE_INFO)) {
            return Schema.create(Schema.Type.DOUBLE);
        }
        if (type.equals(BasicTypeInfo.FLOAT_TYPE_INFO)) {
            return Schema.create(Schema.Type.FLOAT);
        }
        if (type.equals(PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO)) {
            return Schema.create(Schema.Type.BYTES);
        }
        if (type instanceof ListTypeInfo) {
            return Schema.createArray(nullable(schema(((ListTypeInfo<?>) type).getElementTypeInfo(), name + "_element")));
        }
        if (type instanceof MapTypeInfo) {  // Avro map keys are strings: the fixture's map values have String keys
            return Schema.createMap(nullable(schema(((MapTypeInfo<?, ?>) type).getValueTypeInfo(), name + "_value")));
        }
        if (type instanceof RowTypeInfo || type instanceof TupleTypeInfo || type instanceof PojoTypeInfo) {
            CompositeType<?> composite = (CompositeType<?>) type;
            SchemaBuilder.FieldAssembler<Schema> fields = SchemaBuilder.record(name).fields();
            if (type instanceof RowTypeInfo) {
                fields = fields.name("kind").type(nullable(Schema.create(Schema.Type.STRING))).withDefault(null);
            }
            for (int i = 0; i < composite.getArity(); i++) {
                String field = composite.getFieldNames()[i];
                fields = fields.name(field).type(nullable(schema(composite.getTypeAt(i), name + "_" + field))).withDefault(null);
            }
            return fields.endRecord();
        }
        throw new IllegalArgumentException("no Avro type for " + type);
    }

    /** The Avro value of {@code v} (of Flink type {@code type}) in {@code schema} (nullable). */
    static Object value(TypeInformation<?> type, Schema schema, Object v) throws IllegalAccessException {
        if (v == null) {
            return null;
        }
        if (schema.getType() == Schema.Type.UNION) {
            schema = schema.getTypes().get(1);
        }
        if (v instanceof Character || v instanceof Enum) {
            return v instanceof Enum ? ((Enum<?>) v).name() : v.toString();
        }
        if (v instanceof Short || v instanceof Byte) {
            return ((Number) v).intValue();
        }
        if (v instanceof byte[]) {
            return ByteBuffer.wrap((byte[]) v);
        }
        if (type instanceof ListTypeInfo) {
            TypeInformation<?> element = ((ListTypeInfo<?>) type).getElementTypeInfo();
            List<Object> out = new ArrayList<>();
            for (Object e : (List<?>) v) {
                out.add(value(element, schema.getElementType(), e));
            }
            return out;
        }
        if (type instanceof MapTypeInfo) {
            TypeInformation<?> valueType = ((MapTypeInfo<?, ?>) type).getValueTypeInfo();
            Map<String, Object> out = new HashMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                out.put(String.valueOf(e.getKey()), value(valueType, schema.getValueType(), e.getValue()));
            }
            return out;
        }
        if (type instanceof CompositeType) {
            CompositeType<?> composite = (CompositeType<?>) type;
            GenericRecord record = new GenericData.Record(schema);
            int first = 0;
            if (v instanceof Row) {
                record.put(0, ((Row) v).getKind().shortString());
                first = 1;
            }
            for (int i = 0; i < composite.getArity(); i++) {
                Object field;
                if (v instanceof Row) {
                    field = ((Row) v).getField(i);
                } else if (v instanceof Tuple) {
                    field = ((Tuple) v).getField(i);
                } else {
                    Field f = ((PojoTypeInfo<?>) type).getPojoFieldAt(i).getField();
                    field = f.get(v);
                }
                record.put(first + i, value(composite.getTypeAt(i), schema.getFields().get(first + i).schema(), field));
            }
            return record;
        }
        return v;  // String, Long, Integer, Boolean, Double, Float: as they are
    }
}
