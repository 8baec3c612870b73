import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.Enumeration;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;

import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.util.MathUtils;

/**
 * Prints Flink's own answers for key-group math and operator ids, so the Python port in
 * repair/formats/flink/keygroups.py can be checked against the real jar (tests/formats/flink/test_keygroups.py).
 *
 * <p>Compile and run against flink-dist:
 *
 * <pre>
 *   javac -cp flink-dist.jar -d out KeyGroupOracle.java
 *   java -cp flink-dist.jar:out KeyGroupOracle &lt; queries.txt
 * </pre>
 *
 * <p>Reads one query per line from stdin and prints a JSON array with one object per query, in
 * order: {"result": ...} or {"error": "ExceptionClass: message"}. Fields are separated by single
 * spaces (an empty field is an empty string). Strings are passed as hex of
 * their UTF-16 code units (big-endian), so any Java string, even one with a lone surrogate, arrives
 * unchanged. Queries:
 *
 * <pre>
 *   hash string HEX | hash long N | hash int N    -> key.hashCode()
 *   hash short N | hash byte N | hash boolean true|false | hash char UNIT
 *   hash double LONGBITS | hash float INTBITS     -> key.hashCode() of those boxed types
 *   keygroup string HEX MAXP | keygroup long N MAXP | keygroup int N MAXP
 *                                                 -> KeyGroupRangeAssignment.assignToKeyGroup(key, MAXP)
 *   keyhash HASH MAXP                             -> computeKeyGroupForKeyHash(HASH, MAXP)
 *   murmur CODE                                   -> MathUtils.murmurHash(CODE)
 *   range MAXP P INDEX                            -> computeKeyGroupRangeForOperatorIndex: [start, end]
 *   opindex MAXP P KEYGROUP                       -> computeOperatorIndexForKeyGroup
 *   defaultmax P                                  -> computeDefaultMaxParallelism
 *   uid HEX                                       -> new OperatorID(murmur3_128(0) of the UTF-8 uid).toHexString()
 * </pre>
 *
 * <p>For "uid" the hash comes from StreamGraphHasherV2.generateUserSpecifiedHash(String) when the jar
 * has that public method (Flink 2.x); otherwise (Flink 1.x, where it is private and takes a
 * StreamNode) from the same calls it makes: the shaded Guava Hashing.murmur3_128(0).newHasher()
 * .putString(uid, UTF-8).hash().asBytes(). The shaded Guava package differs between Flink versions,
 * so it is found by scanning the jars on the class path.
 */
public final class KeyGroupOracle {

    private static final String HASHING_SUFFIX = "/com/google/common/hash/Hashing.class";

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        UidHasher uidHasher = new UidHasher();
        out.println("[");
        boolean first = true;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            String answer;
            try {
                answer = "{\"result\": " + answer(line.split(" ", -1), uidHasher) + "}";
            } catch (Exception e) {
                answer = "{\"error\": " + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}";
            }
            out.println((first ? "" : ",") + answer);
            first = false;
        }
        out.println("]");
        out.flush();
    }

    private static String answer(String[] q, UidHasher uidHasher) throws Exception {
        switch (q[0]) {
            case "hash":
                return Integer.toString(key(q[1], q[2]).hashCode());
            case "keygroup":
                return Integer.toString(
                        KeyGroupRangeAssignment.assignToKeyGroup(key(q[1], q[2]), Integer.parseInt(q[3])));
            case "keyhash":
                return Integer.toString(
                        KeyGroupRangeAssignment.computeKeyGroupForKeyHash(
                                Integer.parseInt(q[1]), Integer.parseInt(q[2])));
            case "murmur":
                return Integer.toString(MathUtils.murmurHash(Integer.parseInt(q[1])));
            case "range":
                KeyGroupRange range =
                        KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex(
                                Integer.parseInt(q[1]), Integer.parseInt(q[2]), Integer.parseInt(q[3]));
                return "[" + range.getStartKeyGroup() + ", " + range.getEndKeyGroup() + "]";
            case "opindex":
                return Integer.toString(
                        KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup(
                                Integer.parseInt(q[1]), Integer.parseInt(q[2]), Integer.parseInt(q[3])));
            case "defaultmax":
                return Integer.toString(KeyGroupRangeAssignment.computeDefaultMaxParallelism(Integer.parseInt(q[1])));
            case "uid":
                return quote(new OperatorID(uidHasher.hash(utf16(q[1]))).toHexString());
            default:
                throw new IllegalArgumentException("unknown query " + q[0]);
        }
    }

    private static Object key(String type, String value) {
        switch (type) {
            case "string":
                return utf16(value);
            case "long":
                return Long.valueOf(Long.parseLong(value));
            case "int":
                return Integer.valueOf(Integer.parseInt(value));
            case "short":
                return Short.valueOf(Short.parseShort(value));
            case "byte":
                return Byte.valueOf(Byte.parseByte(value));
            case "boolean":
                return Boolean.valueOf(value);
            case "char":
                return Character.valueOf((char) Integer.parseInt(value));
            case "double": // the IEEE 754 bits as a long
                return Double.valueOf(Double.longBitsToDouble(Long.parseLong(value)));
            case "float": // the IEEE 754 bits as an int
                return Float.valueOf(Float.intBitsToFloat(Integer.parseInt(value)));
            default:
                throw new IllegalArgumentException("unknown key type " + type);
        }
    }

    /** Decodes hex of big-endian UTF-16 code units into a Java string. */
    private static String utf16(String hex) {
        char[] chars = new char[hex.length() / 4];
        for (int i = 0; i < chars.length; i++) {
            chars[i] = (char) Integer.parseInt(hex.substring(4 * i, 4 * i + 4), 16);
        }
        return new String(chars);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** Flink's user-specified operator hash, through Flink's own method when it is public. */
    private static final class UidHasher {
        private Method flinkMethod;
        private Method murmur3;
        private Method newHasher;
        private Method putString;
        private Method hash;
        private Method asBytes;

        UidHasher() throws Exception {
            try {
                flinkMethod =
                        Class.forName("org.apache.flink.streaming.api.graph.StreamGraphHasherV2")
                                .getMethod("generateUserSpecifiedHash", String.class);
            } catch (NoSuchMethodException e) {
                String pkg = findShadedGuavaHashPackage();
                Class<?> hashing = Class.forName(pkg + ".Hashing");
                Class<?> hashFunction = Class.forName(pkg + ".HashFunction");
                Class<?> hasher = Class.forName(pkg + ".Hasher");
                murmur3 = hashing.getMethod("murmur3_128", int.class);
                newHasher = hashFunction.getMethod("newHasher");
                putString = hasher.getMethod("putString", CharSequence.class, Charset.class);
                hash = hasher.getMethod("hash");
                asBytes = Class.forName(pkg + ".HashCode").getMethod("asBytes");
            }
        }

        byte[] hash(String uid) throws Exception {
            if (flinkMethod != null) {
                return (byte[]) flinkMethod.invoke(null, uid);
            }
            Object hasher = newHasher.invoke(murmur3.invoke(null, 0));
            putString.invoke(hasher, uid, Charset.forName("UTF-8"));
            return (byte[]) asBytes.invoke(hash.invoke(hasher));
        }

        /** Finds org.apache.flink.shaded.guavaNN.com.google.common.hash in a jar on the class path. */
        private static String findShadedGuavaHashPackage() throws Exception {
            for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
                if (!entry.endsWith(".jar")) {
                    continue;
                }
                try (JarFile jar = new JarFile(entry)) {
                    for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
                        String name = e.nextElement().getName();
                        if (name.startsWith("org/apache/flink/shaded/guava") && name.endsWith(HASHING_SUFFIX)) {
                            return name.substring(0, name.length() - "/Hashing.class".length()).replace('/', '.');
                        }
                    }
                }
            }
            throw new IllegalStateException("no shaded Guava Hashing class on the class path");
        }
    }
}
