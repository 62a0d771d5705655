package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.Random;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;

import org.junit.jupiter.api.Test;

/** A body far larger than any frame, so it is split across many frames. */
class LargeMessageTest extends InteropSupport {

    @Test
    void tenMebibyteBytesMessage() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(session, unique("large"));
        MessageConsumer consumer = session.createConsumer(queue);
        MessageProducer producer = session.createProducer(queue);

        // Random (seeded) rather than a pattern, so a dropped or repeated
        // frame cannot go unnoticed by lining up with the pattern period.
        byte[] body = new byte[10 * 1024 * 1024];
        new Random(0xF3E77L).nextBytes(body);
        BytesMessage m = session.createBytesMessage();
        m.writeBytes(body);
        m.setStringProperty("tag", "large");
        producer.send(m);

        Message r = consumer.receive(Math.max(RECEIVE_TIMEOUT_MS, 60_000));
        assertNotNull(r, "10 MiB message did not arrive within 60 s");
        assertInstanceOf(BytesMessage.class, r);
        BytesMessage br = (BytesMessage) r;
        assertEquals(body.length, br.getBodyLength());
        byte[] got = new byte[body.length];
        assertEquals(body.length, br.readBytes(got));
        assertArrayEquals(body, got);
        assertEquals("large", r.getStringProperty("tag"));
    }
}
