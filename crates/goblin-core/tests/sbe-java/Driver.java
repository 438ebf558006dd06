// Interoperability check for the SBE listener: every request family encoded by the Java codec
// that sbe-tool generates from schemas/goblin-sbe.xml, sent to a fresh goblin-core, and every
// Ack and Error decoded by it and checked. Run by crates/goblin-core/tests/sbe.rs
// (java_codec_interoperates), which then checks the resulting state over RESP.
//
//   java --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -cp <classes>:<sbe-all.jar> Driver <port>
//
// Prints "last-offset N" (the last Ack's logical offset) and exits 0, or names the first
// mismatch and exits 1.

import goblin_sbe.*;
import java.io.DataInputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.agrona.concurrent.UnsafeBuffer;

public final class Driver {
    static final int SOFH = 6;
    static final UnsafeBuffer OUT = new UnsafeBuffer(new byte[1 << 16]);
    static final MessageHeaderEncoder HDR = new MessageHeaderEncoder();
    static OutputStream out;
    static DataInputStream in;
    static long corr = 0;
    static long lastOffset = 0;

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static void fail(String what) {
        System.out.println("MISMATCH: " + what);
        System.exit(1);
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            fail(what);
        }
    }

    /** Frames the message encoded at offset SOFH and sends it. */
    static void send(int messageLength) throws Exception {
        int total = SOFH + messageLength;
        OUT.putInt(0, total, ByteOrder.BIG_ENDIAN);
        OUT.putShort(4, (short) 0x5BE0, ByteOrder.BIG_ENDIAN);
        out.write(OUT.byteArray(), 0, total);
        out.flush();
    }

    static final class Reply {
        boolean error;
        long corr;
        long offset;
        ResultKind kind;
        long intValue;
        double doubleValue;
        List<String> items = new ArrayList<>();
        String bytes;
        ErrorCode code;
        String message;

        public String toString() {
            return error ? "Error(" + corr + ", " + code + ", " + message + ")"
                : "Ack(" + corr + ", offset " + offset + ", " + kind + ", " + intValue + ", " + doubleValue
                    + ", " + items + ", " + bytes + ")";
        }
    }

    static Reply read() throws Exception {
        byte[] head = new byte[SOFH];
        in.readFully(head);
        UnsafeBuffer h = new UnsafeBuffer(head);
        int len = h.getInt(0, ByteOrder.BIG_ENDIAN);
        check((h.getShort(4, ByteOrder.BIG_ENDIAN) & 0xFFFF) == 0x5BE0, "encoding type");
        byte[] body = new byte[len - SOFH];
        in.readFully(body);
        UnsafeBuffer buf = new UnsafeBuffer(body);
        MessageHeaderDecoder hd = new MessageHeaderDecoder().wrap(buf, 0);
        check(hd.schemaId() == AckDecoder.SCHEMA_ID && hd.version() == AckDecoder.SCHEMA_VERSION, "schema");
        Reply r = new Reply();
        if (hd.templateId() == AckDecoder.TEMPLATE_ID) {
            AckDecoder a = new AckDecoder().wrapAndApplyHeader(buf, 0, hd);
            r.corr = a.correlationId();
            r.offset = a.logicalOffset();
            r.kind = a.resultKind();
            r.intValue = a.intValue();
            r.doubleValue = a.doubleValue();
            for (AckDecoder.ItemsDecoder it : a.items()) {
                byte[] item = new byte[it.itemLength()];
                it.getItem(item, 0, item.length);
                r.items.add(new String(item, StandardCharsets.UTF_8));
            }
            byte[] bytes = new byte[a.bytesLength()];
            a.getBytes(bytes, 0, bytes.length);
            r.bytes = new String(bytes, StandardCharsets.UTF_8);
            check(a.encodedLength() + MessageHeaderDecoder.ENCODED_LENGTH == body.length, "Ack length");
        } else if (hd.templateId() == ErrorDecoder.TEMPLATE_ID) {
            ErrorDecoder e = new ErrorDecoder().wrapAndApplyHeader(buf, 0, hd);
            r.error = true;
            r.corr = e.correlationId();
            r.code = e.code();
            byte[] m = new byte[e.messageLength()];
            e.getMessage(m, 0, m.length);
            r.message = new String(m, StandardCharsets.UTF_8);
        } else {
            fail("template " + hd.templateId());
        }
        return r;
    }

    /** Reads the reply to request `c` and checks it is an Ack of `kind`; offsets never decrease. */
    static Reply ack(long c, ResultKind kind) throws Exception {
        Reply r = read();
        check(!r.error && r.corr == c && r.kind == kind, "request " + c + " expected " + kind + ", got " + r);
        check(r.offset >= lastOffset, "offset went back: " + r);
        lastOffset = r.offset;
        return r;
    }

    static int stringSet(String key, String value, StringCondition cond, String comparand, Expiry exp, long ev,
            boolean get) {
        StringSetEncoder e = new StringSetEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr).condition(cond).expiry(exp).returnOld(get ? BooleanType.T : BooleanType.F)
            .expiryValue(ev);
        byte[] k = b(key), v = b(value), c = b(comparand);
        e.putKey(k, 0, k.length).putValue(v, 0, v.length).putComparand(c, 0, c.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int counter(String key, CounterOp op, long delta, double fdelta) {
        CounterEncoder e = new CounterEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        byte[] k = b(key);
        e.correlationId(++corr).op(op).delta(delta).deltaFloat(fdelta).putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int keyWrite(String key, KeyOp op, ExpireCondition cond, long value) {
        KeyWriteEncoder e = new KeyWriteEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        byte[] k = b(key);
        e.correlationId(++corr).op(op).condition(cond).value(value).putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int hashSet(String key, String... fv) {
        HashSetEncoder e = new HashSetEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr).op(HashSetOp.HSET);
        HashSetEncoder.FieldsEncoder g = e.fieldsCount(fv.length / 2);
        for (int i = 0; i < fv.length; i += 2) {
            byte[] f = b(fv[i]), v = b(fv[i + 1]);
            g.next().putField(f, 0, f.length).putValue(v, 0, v.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int hashDel(String key, String... fields) {
        HashDelEncoder e = new HashDelEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr);
        HashDelEncoder.FieldsEncoder g = e.fieldsCount(fields.length);
        for (String f : fields) {
            byte[] x = b(f);
            g.next().putField(x, 0, x.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int setWrite(String key, SetOp op, String... members) {
        SetWriteEncoder e = new SetWriteEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr).op(op);
        SetWriteEncoder.MembersEncoder g = e.membersCount(members.length);
        for (String m : members) {
            byte[] x = b(m);
            g.next().putMember(x, 0, x.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int zadd(String key, boolean ch, Object... sm) {
        SortedSetAddEncoder e = new SortedSetAddEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr).condition(SortedSetCondition.NONE).comparison(SortedSetComparison.NONE)
            .changed(ch ? BooleanType.T : BooleanType.F);
        SortedSetAddEncoder.EntriesEncoder g = e.entriesCount(sm.length / 2);
        for (int i = 0; i < sm.length; i += 2) {
            byte[] m = b((String) sm[i + 1]);
            g.next().score((Double) sm[i]).putMember(m, 0, m.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int zrem(String key, String... members) {
        SortedSetRemoveEncoder e = new SortedSetRemoveEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr);
        SortedSetRemoveEncoder.MembersEncoder g = e.membersCount(members.length);
        for (String m : members) {
            byte[] x = b(m);
            g.next().putMember(x, 0, x.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int push(String key, ListSide side, String... values) {
        ListPushEncoder e = new ListPushEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr).side(side).onlyIfExists(BooleanType.F);
        ListPushEncoder.ValuesEncoder g = e.valuesCount(values.length);
        for (String v : values) {
            byte[] x = b(v);
            g.next().putValue(x, 0, x.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int pop(String key, ListSide side, long count) {
        ListPopEncoder e = new ListPopEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        byte[] k = b(key);
        e.correlationId(++corr).side(side).count(count).putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int arset(String key, long index, String... values) {
        ArraySetEncoder e = new ArraySetEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr).index(index);
        ArraySetEncoder.ValuesEncoder g = e.valuesCount(values.length);
        for (String v : values) {
            byte[] x = b(v);
            g.next().putValue(x, 0, x.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int armset(String key, Object... iv) {
        ArrayMultiSetEncoder e = new ArrayMultiSetEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        e.correlationId(++corr);
        ArrayMultiSetEncoder.EntriesEncoder g = e.entriesCount(iv.length / 2);
        for (int i = 0; i < iv.length; i += 2) {
            byte[] x = b((String) iv[i + 1]);
            g.next().index((Long) iv[i]).putValue(x, 0, x.length);
        }
        byte[] k = b(key);
        e.putKey(k, 0, k.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    static int delex(String key, DeleteCondition cond, String comparand) {
        ConditionalDeleteEncoder e = new ConditionalDeleteEncoder().wrapAndApplyHeader(OUT, SOFH, HDR);
        byte[] k = b(key), c = b(comparand);
        e.correlationId(++corr).condition(cond).putKey(k, 0, k.length).putComparand(c, 0, c.length);
        return MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    public static void main(String[] args) throws Exception {
        try (Socket s = new Socket("127.0.0.1", Integer.parseInt(args[0]))) {
            s.setTcpNoDelay(true);
            s.setSoTimeout(20000);
            out = s.getOutputStream();
            in = new DataInputStream(s.getInputStream());

            send(stringSet("s", "hello", StringCondition.NONE, "", Expiry.PX, 100000, false));
            check(ack(corr, ResultKind.OK).offset == 1, "first write at offset 1");
            send(stringSet("s", "world", StringCondition.IFEQ, "hello", Expiry.KEEPTTL, 0, true));
            check(ack(corr, ResultKind.BYTES).bytes.equals("hello"), "SET .. GET returns the old value");
            send(stringSet("s", "never", StringCondition.NX, "", Expiry.NONE, 0, false));
            ack(corr, ResultKind.NIL);

            send(counter("n", CounterOp.INCRBY, 5, 0));
            check(ack(corr, ResultKind.INT).intValue == 5, "INCRBY");
            send(counter("n", CounterOp.DECRBY, 2, 0));
            check(ack(corr, ResultKind.INT).intValue == 3, "DECRBY");
            send(counter("f", CounterOp.INCRBYFLOAT, 0, 1.25));
            Reply f = ack(corr, ResultKind.DOUBLE);
            check(f.doubleValue == 1.25 && f.bytes.equals("1.25"), "INCRBYFLOAT " + f);

            send(keyWrite("n", KeyOp.PEXPIRE, ExpireCondition.NONE, 100000));
            check(ack(corr, ResultKind.INT).intValue == 1, "PEXPIRE");
            send(keyWrite("n", KeyOp.PERSIST, ExpireCondition.NONE, 0));
            check(ack(corr, ResultKind.INT).intValue == 1, "PERSIST");

            send(hashSet("h", "f1", "v1", "f2", "v2"));
            check(ack(corr, ResultKind.INT).intValue == 2, "HSET");
            send(hashDel("h", "f1", "nope"));
            check(ack(corr, ResultKind.INT).intValue == 1, "HDEL");

            send(setWrite("set", SetOp.SADD, "a", "b", "c"));
            check(ack(corr, ResultKind.INT).intValue == 3, "SADD");
            send(setWrite("set", SetOp.SREM, "a"));
            check(ack(corr, ResultKind.INT).intValue == 1, "SREM");

            send(zadd("z", true, 1.5, "m1", 2.5, "m2"));
            check(ack(corr, ResultKind.INT).intValue == 2, "ZADD");
            send(zrem("z", "m1"));
            check(ack(corr, ResultKind.INT).intValue == 1, "ZREM");

            send(push("l", ListSide.RIGHT, "x", "y", "z"));
            check(ack(corr, ResultKind.INT).intValue == 3, "RPUSH");
            send(pop("l", ListSide.LEFT, 2));
            Reply p = ack(corr, ResultKind.ARRAY);
            check(p.items.equals(Arrays.asList("x", "y")), "LPOP 2 " + p);
            send(pop("l", ListSide.RIGHT, ListPopEncoder.countNullValue()));
            check(ack(corr, ResultKind.BYTES).bytes.equals("z"), "RPOP");

            send(arset("a", 3, "p", "q"));
            ack(corr, ResultKind.INT);
            send(armset("a", 0L, "r", 10L, "s"));
            ack(corr, ResultKind.INT);

            send(delex("s", DeleteCondition.IFEQ, "world"));
            check(ack(corr, ResultKind.INT).intValue == 1, "DELEX IFEQ");

            // A command error: the Redis text, nothing changed.
            send(counter("h", CounterOp.INCRBY, 1, 0));
            Reply w = read();
            check(w.error && w.corr == corr && w.code == ErrorCode.COMMAND_ERROR && w.message.startsWith("WRONGTYPE"),
                "WRONGTYPE " + w);
            // An unknown template: its correlationId comes back with the Error.
            int n = counter("x", CounterOp.INCRBY, 1, 0);
            OUT.putShort(SOFH + 2, (short) 99, ByteOrder.LITTLE_ENDIAN);
            send(n);
            Reply u = read();
            check(u.error && u.corr == corr && u.code == ErrorCode.UNKNOWN_TEMPLATE, "unknown template " + u);

            // A pipelined burst: 200 requests written at once, answered in order.
            java.io.ByteArrayOutputStream burst = new java.io.ByteArrayOutputStream();
            long first = corr + 1;
            for (int i = 0; i < 200; i++) {
                int len = setWrite("burst", SetOp.SADD, "m" + i);
                OUT.putInt(0, SOFH + len, ByteOrder.BIG_ENDIAN);
                OUT.putShort(4, (short) 0x5BE0, ByteOrder.BIG_ENDIAN);
                burst.write(OUT.byteArray(), 0, SOFH + len);
            }
            out.write(burst.toByteArray());
            out.flush();
            for (int i = 0; i < 200; i++) {
                check(ack(first + i, ResultKind.INT).intValue == 1, "burst " + i);
            }
            System.out.println("last-offset " + lastOffset);
        }
    }
}
