package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.AlreadyClosedException;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.Envelope;
import com.rabbitmq.client.ShutdownSignalException;

import org.junit.jupiter.api.AfterEach;

/**
 * Shared plumbing. The broker address comes from -Dferry.host / -Dferry.port;
 * every queue and exchange name carries a per-JVM run id, so the suite can run
 * repeatedly against one long-lived broker. Queues and exchanges a test
 * declares through {@link #queue} / {@link #exchange} are deleted afterwards.
 */
abstract class RabbitSupport {
    static final String HOST = System.getProperty("ferry.host", "127.0.0.1");
    static final int PORT = Integer.getInteger("ferry.port", 5672);

    /** Upper bound for anything we expect to happen (a delivery, a callback). */
    static final long TIMEOUT_MS = Long.getLong("ferry.receiveTimeoutMs", 10_000);
    /** How long "nothing more arrives" is watched, where a test must check that. */
    static final long QUIET_MS = 300;

    static final String RUN_ID = UUID.randomUUID().toString().substring(0, 8);
    private static final AtomicInteger COUNTER = new AtomicInteger();

    private final List<Connection> connections = new ArrayList<>();
    private final List<String> queues = new ArrayList<>();
    private final List<String> exchanges = new ArrayList<>();

    static String unique(String prefix) {
        return "ferry." + prefix + "." + RUN_ID + "." + COUNTER.incrementAndGet();
    }

    static ConnectionFactory factory() {
        ConnectionFactory f = new ConnectionFactory();
        f.setHost(HOST);
        f.setPort(PORT);
        f.setUsername("guest");
        f.setPassword("guest");
        f.setVirtualHost("/");
        // Recovery would hide broker faults behind reconnects and redeclares.
        f.setAutomaticRecoveryEnabled(false);
        f.setTopologyRecoveryEnabled(false);
        f.setConnectionTimeout(5_000);
        f.setHandshakeTimeout(5_000);
        f.setShutdownTimeout(5_000);
        // Synchronous methods (declare, get, ...) give up instead of waiting 10 min.
        f.setChannelRpcTimeout((int) TIMEOUT_MS);
        f.setRequestedHeartbeat(30);
        return f;
    }

    Connection connect() throws Exception {
        Connection c = factory().newConnection("ferry-interop-" + RUN_ID);
        connections.add(c);
        return c;
    }

    /** Declares a durable-less, non-exclusive queue that is deleted after the test. */
    String queue(Channel ch, String prefix, java.util.Map<String, Object> args) throws IOException {
        String name = unique(prefix);
        ch.queueDeclare(name, false, false, false, args);
        queues.add(name);
        return name;
    }

    String queue(Channel ch, String prefix) throws IOException {
        return queue(ch, prefix, null);
    }

    String exchange(Channel ch, String prefix, String type) throws IOException {
        String name = exchangeName(prefix);
        ch.exchangeDeclare(name, type, false, false, null);
        return name;
    }

    /** A unique exchange name, deleted after the test; for tests that declare it themselves. */
    String exchangeName(String prefix) {
        String name = unique(prefix);
        exchanges.add(name);
        return name;
    }

    @AfterEach
    void cleanUp() {
        if (!queues.isEmpty() || !exchanges.isEmpty()) {
            try (Connection c = factory().newConnection("ferry-interop-cleanup")) {
                for (String q : queues) {
                    Channel ch = c.createChannel();
                    try {
                        ch.queueDelete(q);
                        ch.close();
                    } catch (Exception ignored) {
                        // A test may have deleted it already.
                    }
                }
                for (String x : exchanges) {
                    Channel ch = c.createChannel();
                    try {
                        ch.exchangeDelete(x);
                        ch.close();
                    } catch (Exception ignored) {
                        // Same.
                    }
                }
            } catch (Exception ignored) {
                // Cleanup is best effort; names are unique per run anyway.
            }
            queues.clear();
            exchanges.clear();
        }
        for (Connection c : connections) {
            try {
                if (c.isOpen()) {
                    c.close(5_000);
                }
            } catch (Exception ignored) {
                c.abort(1_000);
            }
        }
        connections.clear();
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return new String(b, StandardCharsets.UTF_8);
    }

    static String text(Delivery d) {
        return text(d.getBody());
    }

    static void publish(Channel ch, String exchange, String key, String body) throws IOException {
        ch.basicPublish(exchange, key, null, bytes(body));
    }

    /** A consumer that hands every delivery and cancel notification to the test thread. */
    static class Collector extends DefaultConsumer {
        final BlockingQueue<Delivery> deliveries = new LinkedBlockingQueue<>();
        final CountDownLatch cancelled = new CountDownLatch(1);
        final AtomicReference<String> cancelledTag = new AtomicReference<>();

        Collector(Channel channel) {
            super(channel);
        }

        @Override
        public void handleDelivery(String consumerTag, Envelope envelope,
                AMQP.BasicProperties properties, byte[] body) {
            deliveries.add(new Delivery(envelope, properties, body));
        }

        @Override
        public void handleCancel(String consumerTag) {
            cancelledTag.set(consumerTag);
            cancelled.countDown();
        }

        Delivery next(String what) throws InterruptedException {
            Delivery d = deliveries.poll(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            assertNotNull(d, "no delivery within " + TIMEOUT_MS + " ms: " + what);
            return d;
        }

        /** Waits {@link #QUIET_MS} and returns what arrived (null if nothing did). */
        Delivery poll() throws InterruptedException {
            return deliveries.poll(QUIET_MS, TimeUnit.MILLISECONDS);
        }

        /**
         * Bodies received until one equals {@code marker} (consumed, not returned):
         * a marker published last bounds what can arrive before it, without a sleep.
         */
        List<String> untilMarker(String marker, String what) throws InterruptedException {
            List<String> got = new ArrayList<>();
            while (true) {
                String body = text(next(what + " (got so far " + got + ")"));
                if (marker.equals(body)) {
                    return got;
                }
                got.add(body);
            }
        }
    }

    /** Starts an auto-ack consumer on {@code queue} and returns its collector. */
    static Collector consume(Channel ch, String queue) throws IOException {
        Collector c = new Collector(ch);
        ch.basicConsume(queue, true, c);
        return c;
    }

    /** Records the channel's shutdown so asynchronous channel errors can be awaited. */
    static AtomicReference<ShutdownSignalException> watchShutdown(Channel ch, CountDownLatch closed) {
        AtomicReference<ShutdownSignalException> cause = new AtomicReference<>();
        ch.addShutdownListener(s -> {
            cause.set(s);
            closed.countDown();
        });
        return cause;
    }

    /** The reply code of a server-sent channel.close carried by an exception from a channel call. */
    static int channelCloseCode(Throwable t) {
        Throwable x = t;
        while (x != null && !(x instanceof ShutdownSignalException)) {
            x = x.getCause();
        }
        if (x == null) {
            fail("expected a channel close, got " + t, t);
        }
        ShutdownSignalException s = (ShutdownSignalException) x;
        assertTrue(!s.isHardError(), "expected a channel error, got a connection error: " + s);
        assertTrue(s.getReason() instanceof AMQP.Channel.Close, "close reason: " + s.getReason());
        return ((AMQP.Channel.Close) s.getReason()).getReplyCode();
    }

    /** Checks the connection still works: a new channel can declare, publish and get. */
    void assertConnectionUsable(Connection c) throws Exception {
        assertTrue(c.isOpen(), "connection closed");
        Channel ch = c.createChannel();
        String q = queue(ch, "usable");
        publish(ch, "", q, "still-here");
        com.rabbitmq.client.GetResponse r = ch.basicGet(q, true);
        assertNotNull(r, "basic.get on the fresh channel found nothing");
        assertEquals("still-here", text(r.getBody()));
        ch.close();
    }

    /** Absorbs AlreadyClosedException (a closed channel's close()). */
    static void closeQuietly(Channel ch) {
        try {
            ch.close();
        } catch (AlreadyClosedException | IOException | java.util.concurrent.TimeoutException ignored) {
            // Nothing to do.
        }
    }
}
