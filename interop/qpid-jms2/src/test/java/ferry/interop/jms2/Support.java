package ferry.interop.jms2;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

import jakarta.jms.Connection;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSException;

import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.AfterEach;

/**
 * Shared plumbing: the broker address comes from -Dferry.host / -Dferry.port. AMQP 1.0 has no
 * queue declare, so queues are declared (and deleted) over 0-9-1 with the RabbitMQ client;
 * every name carries a per-JVM run id so runs never see each other's messages.
 */
abstract class Support {
    static final String HOST = System.getProperty("ferry.host", "127.0.0.1");
    static final int PORT = Integer.getInteger("ferry.port", 5672);
    static final long TIMEOUT_MS = 10_000;

    static final String RUN_ID = UUID.randomUUID().toString().substring(0, 8);
    private static final AtomicInteger COUNTER = new AtomicInteger();

    private final List<AutoCloseable> opened = new ArrayList<>();
    private final List<String> queues = new ArrayList<>();

    static String unique(String prefix) {
        return "jms2." + prefix + "." + RUN_ID + "." + COUNTER.incrementAndGet();
    }

    static JmsConnectionFactory factory(String options) {
        String url = "amqp://" + HOST + ":" + PORT + "?amqp.idleTimeout=10000" + options;
        return new JmsConnectionFactory("guest", "guest", url);
    }

    JMSContext context() {
        return context(JMSContext.AUTO_ACKNOWLEDGE);
    }

    JMSContext context(int mode) {
        JMSContext context = factory("").createContext(mode);
        opened.add(context);
        return context;
    }

    Connection connection() throws JMSException {
        Connection c = factory("").createConnection();
        opened.add(c);
        c.start();
        return c;
    }

    /** Declares a queue over 0-9-1 (deleted after the test). */
    String declareQueue(String prefix) throws Exception {
        String name = unique(prefix);
        try (com.rabbitmq.client.Connection c = amqp091()) {
            c.createChannel().queueDeclare(name, false, false, false, null);
        }
        queues.add(name);
        return name;
    }

    static com.rabbitmq.client.Connection amqp091() throws Exception {
        com.rabbitmq.client.ConnectionFactory f = new com.rabbitmq.client.ConnectionFactory();
        f.setHost(HOST);
        f.setPort(PORT);
        f.setUsername("guest");
        f.setPassword("guest");
        return f.newConnection();
    }

    /** Messages waiting on a queue, asked over 0-9-1. */
    static long depth(String queue) throws Exception {
        try (com.rabbitmq.client.Connection c = amqp091()) {
            return c.createChannel().queueDeclarePassive(queue).getMessageCount();
        }
    }

    @AfterEach
    void cleanUp() throws Exception {
        for (AutoCloseable c : opened) {
            try {
                c.close();
            } catch (Exception ignored) {
                // Already broken on purpose by the test.
            }
        }
        opened.clear();
        if (!queues.isEmpty()) {
            try (com.rabbitmq.client.Connection c = amqp091()) {
                for (String q : queues) {
                    c.createChannel().queueDelete(q);
                }
            }
            queues.clear();
        }
    }
}
