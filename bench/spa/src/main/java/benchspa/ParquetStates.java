package benchspa;

import java.util.List;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.core.fs.Path;
import org.apache.flink.formats.avro.typeutils.GenericRecordAvroTypeInfo;
import org.apache.flink.formats.parquet.ParquetBuilder;
import org.apache.flink.formats.parquet.ParquetWriterFactory;
import org.apache.flink.state.api.OperatorIdentifier;
import org.apache.flink.state.api.SavepointReader;
import org.apache.flink.streaming.api.functions.sink.filesystem.OutputFileConfig;
import org.apache.flink.streaming.api.functions.sink.filesystem.bucketassigners.BasePathBucketAssigner;
import org.apache.flink.util.Collector;
import org.apache.parquet.avro.AvroParquetWriter;
import org.apache.parquet.avro.AvroWriteSupport;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;

/**
 * The State Processor API writing each state's rows to Parquet, as a user migrating state out of
 * Flink would: one {@code readKeyedState} per state giving Avro records ({@link AvroRows}), and a
 * {@link FileSink} with flink-parquet's {@link ParquetWriterFactory} (parquet-avro's writer, Snappy: the
 * codec {@code repair export} writes by default; {@code AvroParquetWriters.forGenericRecord} leaves it
 * uncompressed) into {@code OUT/operator=<uid>/state=<name>/part-*.parquet}, the layout of
 * {@code repair export}. The job runs in batch mode: the FileSink publishes its files at the end of
 * the input (in streaming mode only a checkpoint would).
 */
final class ParquetStates {
    private ParquetStates() {}

    /** Adds to the job the reading of {@code spec} of {@code operator} and its writing under {@code out}. */
    @SuppressWarnings("unchecked")
    static void write(SavepointReader savepoint, String operator, ReadAllStates.Spec spec, TypeInformation<?> keyType,
                      String out) throws Exception {
        Schema schema = AvroRows.rowSchema(keyType, spec.userKeyType, spec.valueType, spec.isList());
        String schemaJson = schema.toString();
        FileSink<GenericRecord> sink = FileSink
                .forBulkFormat(new Path(out, "operator=" + operator + "/state=" + spec.name()), new ParquetWriterFactory<>(snappy(schemaJson)))
                .withBucketAssigner(new BasePathBucketAssigner<>())
                .withOutputFileConfig(OutputFileConfig.builder().withPartPrefix("part").withPartSuffix(".parquet").build())
                .build();
        savepoint.readKeyedState(OperatorIdentifier.forUid(operator), new Writer(operator, spec, keyType, schemaJson),
                        (TypeInformation<Object>) keyType, new GenericRecordAvroTypeInfo(schema))
                .filter(row -> row.get("key") != null)  // the placeholders of keys without rows (Writer.readKey)
                .sinkTo(sink);
    }

    /** parquet-avro's writer of the rows' schema with Snappy. */
    private static ParquetBuilder<GenericRecord> snappy(String schemaJson) {
        return file -> AvroParquetWriter.<GenericRecord>builder(file)
                .withSchema(new Schema.Parser().parse(schemaJson))
                .withDataModel(GenericData.get())
                .withCompressionCodec(CompressionCodecName.SNAPPY)
                .config(AvroWriteSupport.WRITE_OLD_LIST_STRUCTURE, "false")  // lists as Arrow writes them (export's)
                .build();
    }

    /** Reads one state for each key, counting its rows and giving each as an Avro record. */
    static final class Writer extends ReadAllStates.StateReader<GenericRecord> {
        private final TypeInformation<?> keyType;
        private final String schemaJson;  // an Avro Schema is not serializable in every Avro the Flink lines ship
        private transient Schema schema;

        Writer(String operator, ReadAllStates.Spec spec, TypeInformation<?> keyType, String schemaJson) {
            super(operator, List.of(spec));
            this.keyType = keyType;
            this.schemaJson = schemaJson;
        }

        @Override
        public void open(org.apache.flink.api.common.functions.OpenContext context) throws Exception {
            super.open(context);
            schema = new Schema.Parser().parse(schemaJson);
        }

        @Override
        public void readKey(Object key, Context context, Collector<GenericRecord> out) throws Exception {
            ReadAllStates.Spec spec = specs.get(0);
            Object avroKey = AvroRows.value(keyType, schema.getField("key").schema(), key);
            long rows = read(0, key, (userKey, index, value) -> {
                GenericRecord row = new GenericData.Record(schema);
                row.put("key", avroKey);
                if (spec.userKeyType != null) {
                    row.put("user_key", AvroRows.value(spec.userKeyType, schema.getField("user_key").schema(), userKey));
                }
                row.put("value", AvroRows.value(spec.valueType, schema.getField("value").schema(), value));
                if (spec.isList()) {
                    row.put("list_index", index);
                }
                out.collect(row);
            });
            if (rows == 0) {  // the input format stops at a key that gives no record: a placeholder, filtered out
                out.collect(new GenericData.Record(schema));
            }
        }
    }
}
