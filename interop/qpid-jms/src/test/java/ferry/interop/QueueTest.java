package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;

import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.MessageProducer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.junit.jupiter.api.Test;

class QueueTest extends InteropSupport {

    @Test
    void textMessagesArriveInOrder() throws Exception {
        Connection c = connect();
        Session session = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(session, unique("queue.text"));
        MessageConsumer consumer = session.createConsumer(queue);
        MessageProducer producer = session.createProducer(queue);

        int n = 50;
        for (int i = 0; i < n; i++) {
            producer.send(session.createTextMessage("text-" + i + " \u00e9\u4e2d"));
        }
        for (int i = 0; i < n; i++) {
            Message m = receive(consumer, "text message " + i);
            assertInstanceOf(TextMessage.class, m);
            assertEquals("text-" + i + " \u00e9\u4e2d", ((TextMessage) m).getText());
            assertFalse(m.getJMSRedelivered());
        }
        // All n were consumed (auto-ack), so the queue must now be empty.
        assertNull(consumer.receive(500));
    }

    @Test
    void bytesMessagesArriveInOrderFromAnotherConnection() throws Exception {
        Connection sender = connect();
        Connection receiver = connect();
        String name = unique("queue.bytes");
        Session sendSession = sender.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Session recvSession = receiver.createSession(false, Session.AUTO_ACKNOWLEDGE);
        // Declared by the sender first: the messages must wait in the queue
        // until a consumer appears on a different connection.
        MessageProducer producer = sendSession.createProducer(createdQueue(sendSession, name));

        int n = 20;
        for (int i = 0; i < n; i++) {
            BytesMessage m = sendSession.createBytesMessage();
            m.writeBytes(payload(i));
            producer.send(m, i % 2 == 0 ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT,
                    Message.DEFAULT_PRIORITY, 0);
        }

        MessageConsumer consumer = recvSession.createConsumer(createdQueue(recvSession, name));
        for (int i = 0; i < n; i++) {
            Message m = receive(consumer, "bytes message " + i);
            assertInstanceOf(BytesMessage.class, m);
            BytesMessage bm = (BytesMessage) m;
            byte[] body = new byte[(int) bm.getBodyLength()];
            bm.readBytes(body);
            assertArrayEquals(payload(i), body, "body of message " + i);
            assertEquals(i % 2 == 0 ? DeliveryMode.PERSISTENT : DeliveryMode.NON_PERSISTENT,
                    m.getJMSDeliveryMode(), "delivery mode of message " + i);
        }
    }

    private static byte[] payload(int i) {
        byte[] prefix = ("bytes-" + i + ":").getBytes(StandardCharsets.US_ASCII);
        byte[] out = new byte[prefix.length + 256];
        System.arraycopy(prefix, 0, out, 0, prefix.length);
        for (int b = 0; b < 256; b++) {
            out[prefix.length + b] = (byte) (b ^ i);
        }
        return out;
    }
}
