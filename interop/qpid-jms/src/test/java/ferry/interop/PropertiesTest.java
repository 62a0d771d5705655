package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.HashSet;
import java.util.Set;

import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Destination;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.junit.jupiter.api.Test;

/** Header fields and typed properties survive the trip through the broker. */
class PropertiesTest extends InteropSupport {

    @Test
    void everyPropertyTypeAndJmsHeader() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(session, unique("props"));
        String replyName = unique("props.reply");
        Queue replyTo = createdQueue(session, replyName);
        MessageConsumer consumer = session.createConsumer(queue);
        MessageProducer producer = session.createProducer(queue);

        TextMessage m = session.createTextMessage("with properties");
        m.setBooleanProperty("pBool", true);
        m.setByteProperty("pByte", (byte) -7);
        m.setShortProperty("pShort", (short) -30000);
        m.setIntProperty("pInt", -2_000_000_000);
        m.setLongProperty("pLong", -9_000_000_000_000_000_000L);
        m.setFloatProperty("pFloat", 3.25f);
        m.setDoubleProperty("pDouble", -1.0e300);
        m.setStringProperty("pString", "h\u00e9llo \u4e16\u754c");
        m.setStringProperty("pEmpty", "");
        String correlationId = "corr-" + RUN_ID;
        m.setJMSCorrelationID(correlationId);
        m.setJMSReplyTo(replyTo);
        m.setJMSType("ferry.test.type");
        producer.send(m, DeliveryMode.NON_PERSISTENT, 7, 0);

        Message r = receive(consumer, "message with properties");
        assertEquals("with properties", ((TextMessage) r).getText());

        assertEquals(true, r.getBooleanProperty("pBool"));
        assertEquals((byte) -7, r.getByteProperty("pByte"));
        assertEquals((short) -30000, r.getShortProperty("pShort"));
        assertEquals(-2_000_000_000, r.getIntProperty("pInt"));
        assertEquals(-9_000_000_000_000_000_000L, r.getLongProperty("pLong"));
        assertEquals(3.25f, r.getFloatProperty("pFloat"));
        assertEquals(-1.0e300, r.getDoubleProperty("pDouble"));
        assertEquals("h\u00e9llo \u4e16\u754c", r.getStringProperty("pString"));
        assertEquals("", r.getStringProperty("pEmpty"));

        // The typed getters above would also accept widened values; the
        // object forms prove each value kept its AMQP type on the wire.
        assertInstanceOf(Boolean.class, r.getObjectProperty("pBool"));
        assertInstanceOf(Byte.class, r.getObjectProperty("pByte"));
        assertInstanceOf(Short.class, r.getObjectProperty("pShort"));
        assertInstanceOf(Integer.class, r.getObjectProperty("pInt"));
        assertInstanceOf(Long.class, r.getObjectProperty("pLong"));
        assertInstanceOf(Float.class, r.getObjectProperty("pFloat"));
        assertInstanceOf(Double.class, r.getObjectProperty("pDouble"));
        assertInstanceOf(String.class, r.getObjectProperty("pString"));

        Set<String> names = new HashSet<>();
        for (Object n : Collections.list(r.getPropertyNames())) {
            names.add((String) n);
        }
        assertTrue(names.containsAll(Set.of("pBool", "pByte", "pShort", "pInt", "pLong",
                "pFloat", "pDouble", "pString", "pEmpty")), "property names: " + names);

        assertEquals(correlationId, r.getJMSCorrelationID());
        assertEquals("ferry.test.type", r.getJMSType());
        assertEquals(7, r.getJMSPriority());
        assertEquals(DeliveryMode.NON_PERSISTENT, r.getJMSDeliveryMode());
        assertNotNull(r.getJMSMessageID());

        Destination gotReplyTo = r.getJMSReplyTo();
        assertNotNull(gotReplyTo, "JMSReplyTo");
        // Use the received reply-to as a real destination: a reply must land
        // in the queue the sender named.
        MessageConsumer replyConsumer = session.createConsumer(replyTo);
        session.createProducer(gotReplyTo).send(session.createTextMessage("reply-" + correlationId));
        assertEquals("reply-" + correlationId, receiveText(replyConsumer, "reply via JMSReplyTo"));
    }

    @Test
    void mapMessageWithEveryValueType() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(session, unique("map"));
        MessageConsumer consumer = session.createConsumer(queue);
        MessageProducer producer = session.createProducer(queue);

        byte[] bytes = {0, 1, -1, 127, -128, 42};
        MapMessage m = session.createMapMessage();
        m.setBoolean("bool", true);
        m.setByte("byte", (byte) -100);
        m.setShort("short", (short) 12345);
        // AMQP 0-10's char is a single octet and the 0-x client decodes it
        // sign-extended, so only ASCII chars survive; that is the client's
        // codec, not the broker (which never looks inside the map body).
        m.setChar("char", 'Z');
        m.setInt("int", Integer.MIN_VALUE);
        m.setLong("long", Long.MAX_VALUE);
        m.setFloat("float", -0.5f);
        m.setDouble("double", Math.PI);
        m.setString("string", "map \u00fcml\u00e4ut");
        m.setBytes("bytes", bytes);
        m.setString("emptyString", "");
        producer.send(m);

        Message r = receive(consumer, "map message");
        assertInstanceOf(MapMessage.class, r);
        MapMessage mm = (MapMessage) r;
        assertEquals(true, mm.getBoolean("bool"));
        assertEquals((byte) -100, mm.getByte("byte"));
        assertEquals((short) 12345, mm.getShort("short"));
        assertEquals('Z', mm.getChar("char"));
        assertEquals(Integer.MIN_VALUE, mm.getInt("int"));
        assertEquals(Long.MAX_VALUE, mm.getLong("long"));
        assertEquals(-0.5f, mm.getFloat("float"));
        assertEquals(Math.PI, mm.getDouble("double"));
        assertEquals("map \u00fcml\u00e4ut", mm.getString("string"));
        assertArrayEquals(bytes, mm.getBytes("bytes"));
        assertEquals("", mm.getString("emptyString"));

        Set<String> names = new HashSet<>();
        for (Object n : Collections.list(mm.getMapNames())) {
            names.add((String) n);
        }
        assertEquals(Set.of("bool", "byte", "short", "char", "int", "long", "float", "double",
                "string", "bytes", "emptyString"), names);
    }
}
