package ferry.interop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

import javax.jms.Connection;
import javax.jms.JMSException;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Queue;
import javax.jms.Session;
import javax.jms.TextMessage;

import org.apache.qpid.client.AMQConnection;
import org.apache.qpid.framing.ProtocolVersion;
import org.junit.jupiter.api.AfterEach;

/**
 * Shared plumbing: the broker address comes from -Dferry.host / -Dferry.port /
 * -Dferry.vhost, and every queue, routing key and header value carries a
 * per-JVM run id so the suite can run repeatedly (or concurrently) against one
 * long-lived broker without tests seeing each other's messages.
 */
abstract class InteropSupport {
    static final String HOST = System.getProperty("ferry.host", "127.0.0.1");
    static final int PORT = Integer.getInteger("ferry.port", 5672);
    static final String VHOST = System.getProperty("ferry.vhost", "default");

    /** Upper bound for any message we expect to arrive. */
    static final long RECEIVE_TIMEOUT_MS = Long.getLong("ferry.receiveTimeoutMs", 10_000);

    static final String RUN_ID = UUID.randomUUID().toString().substring(0, 8);
    private static final AtomicInteger COUNTER = new AtomicInteger();

    private final List<Connection> connections = new ArrayList<>();

    static String unique(String prefix) {
        return "ferry." + prefix + "." + RUN_ID + "." + COUNTER.incrementAndGet();
    }

    /**
     * A 0-x client connection URL. The protocol is chosen by the system
     * property qpid.amqp.version (set to 0-10 in the pom); PLAIN is pinned so
     * the test does not depend on which other mechanisms a broker offers, and
     * retries are off so a dead broker fails fast instead of hanging.
     */
    static String connectionUrl(String extraUrlOptions) {
        return connectionUrl(PORT, extraUrlOptions);
    }

    /** {@link #connectionUrl(String)} for a broker on another port (one a test starts). */
    static String connectionUrl(int port, String extraUrlOptions) {
        String brokerOptions = "sasl_mechs='PLAIN'&connecttimeout='5000'&retries='0'&connectdelay='0'";
        return "amqp://guest:guest@ferry-interop/" + VHOST
                + "?brokerlist='tcp://" + HOST + ":" + port + "?" + brokerOptions + "'"
                + extraUrlOptions;
    }

    Connection connect() throws Exception {
        return connect("");
    }

    Connection connect(String extraUrlOptions) throws Exception {
        AMQConnection connection = new AMQConnection(connectionUrl(extraUrlOptions));
        connections.add(connection);
        // Everything below is only meaningful if we really talk 0-10; the
        // client would silently fall back to 0-9-1 if the broker offered it.
        assertEquals(ProtocolVersion.v0_10, connection.getProtocolVersion(),
                "negotiated AMQP protocol version");
        // Errors are asserted where tests provoke them; without a listener the
        // client also logs each one as an unhandled ERROR, which misleads.
        connection.setExceptionListener(e -> { });
        connection.start();
        return connection;
    }

    @AfterEach
    void closeConnections() {
        for (Connection c : connections) {
            try {
                c.close();
            } catch (JMSException ignored) {
                // A test may already have broken the connection on purpose.
            }
        }
        connections.clear();
    }

    /**
     * qpidd semantics: an execution exception ends the session, not the connection, so a new
     * session on {@code c} still sends and receives.
     */
    static void assertConnectionStillUsable(Connection c) throws Exception {
        Session again = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Queue queue = createdQueue(again, unique("after-error"));
        MessageConsumer consumer = again.createConsumer(queue);
        again.createProducer(queue).send(again.createTextMessage("still alive"));
        assertEquals("still alive", receiveText(consumer, "message on a new session after the error"));
    }

    /** An exception with its causes and linked exceptions, for assertions on the broker's error. */
    static String describe(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable x = t; x != null; x = x.getCause() == x ? null : x.getCause()) {
            sb.append(x.getClass().getName()).append(": ").append(x.getMessage()).append(" | ");
            if (x instanceof JMSException && ((JMSException) x).getLinkedException() != null
                    && ((JMSException) x).getLinkedException() != x.getCause()) {
                Exception linked = ((JMSException) x).getLinkedException();
                sb.append("linked ").append(linked.getClass().getName()).append(": ")
                        .append(linked.getMessage()).append(" | ");
            }
        }
        return sb.toString();
    }

    /** A queue that the client declares (queue.declare) on first use. */
    static Queue createdQueue(Session session, String name) throws JMSException {
        return session.createQueue("ADDR:" + name + "; {create: always}");
    }

    static Message receive(MessageConsumer consumer, String what) throws JMSException {
        Message m = consumer.receive(RECEIVE_TIMEOUT_MS);
        assertNotNull(m, "no message within " + RECEIVE_TIMEOUT_MS + " ms: " + what);
        return m;
    }

    static String receiveText(MessageConsumer consumer, String what) throws JMSException {
        Message m = receive(consumer, what);
        return ((TextMessage) m).getText();
    }

    /**
     * Reads text messages until one equals {@code marker} (which is consumed
     * and not returned). Used instead of "wait N seconds and expect nothing":
     * a marker sent after the messages under test bounds what can arrive
     * before it, without a sleep.
     */
    static List<String> receiveUntilMarker(MessageConsumer consumer, String marker, String what)
            throws JMSException {
        List<String> got = new ArrayList<>();
        while (true) {
            String text = receiveText(consumer, what + " (got so far " + got + ")");
            if (marker.equals(text)) {
                return got;
            }
            got.add(text);
        }
    }
}
