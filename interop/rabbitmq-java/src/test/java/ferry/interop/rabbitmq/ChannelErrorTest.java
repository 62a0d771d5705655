package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.AlreadyClosedException;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ShutdownSignalException;

import org.junit.jupiter.api.Test;

/** Channel errors close only their channel; the connection and its other channels go on. */
class ChannelErrorTest extends RabbitSupport {

    @Test
    void passiveDeclareOfMissingQueueIs404AndOnlyClosesThatChannel() throws Exception {
        Connection c = connect();
        Channel bystander = c.createChannel();
        String q = queue(bystander, "bystander");
        Collector bc = consume(bystander, q);

        Channel ch = c.createChannel();
        IOException e = assertThrows(IOException.class, () -> ch.queueDeclarePassive(unique("missing")));
        assertEquals(404, channelCloseCode(e), "passive declare of a missing queue: NOT_FOUND");
        assertFalse(ch.isOpen(), "the failed channel is still open");
        assertTrue(c.isOpen(), "a channel error closed the connection");

        // The other channel and its consumer keep working.
        assertTrue(bystander.isOpen());
        publish(bystander, "", q, "still delivered");
        assertEquals("still delivered", text(bc.next("delivery on the bystander channel")));
        assertConnectionUsable(c);
    }

    @Test
    void passiveDeclareOfMissingExchangeIs404() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        IOException e = assertThrows(IOException.class, () -> ch.exchangeDeclarePassive(unique("missing-x")));
        assertEquals(404, channelCloseCode(e));
        assertConnectionUsable(c);
    }

    @Test
    void publishToMissingExchangeClosesTheChannelWith404() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        CountDownLatch closed = new CountDownLatch(1);
        AtomicReference<ShutdownSignalException> why = watchShutdown(ch, closed);
        publish(ch, unique("missing-x"), "k", "nowhere");
        assertTrue(closed.await(TIMEOUT_MS, TimeUnit.MILLISECONDS),
                "channel not closed after publishing to a missing exchange");
        assertEquals(404, channelCloseCode(why.get()));
        assertConnectionUsable(c);
    }

    /**
     * close() right after a publish to a missing exchange, with the client's channel.close
     * crossing the broker's 404 channel.close: the client answers the broker's close with
     * close-ok and takes the broker's close-ok to its own close. RabbitMQ answers the crossing
     * close with close-ok, keeps the channel closing until its own close is acknowledged, and
     * never closes the connection for it (issue 16: ferryd sent 504 "channel N is not open").
     *
     * <p>The broker answers so fast that the client would usually read the 404 before its
     * close() starts and send nothing. So the client's reader thread is held in a return
     * listener (they run on it) until close() has sent channel.close: the client's channel lock,
     * taken by close() before isOpen() turns false, orders the close before the close-ok.
     */
    @Test
    void channelCloseCrossingTheBrokersCloseKeepsTheConnection() throws Exception {
        Connection c = connect();
        Channel bystander = c.createChannel();
        String q = queue(bystander, "bystander");
        Collector bc = consume(bystander, q);

        Channel ch = c.createChannel();
        CountDownLatch returned = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        ch.addReturnListener(r -> {
            returned.countDown();
            try {
                release.await(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        ch.basicPublish("", unique("no-such-queue"), true, null, bytes("returned"));
        assertTrue(returned.await(TIMEOUT_MS, TimeUnit.MILLISECONDS), "no basic.return");
        publish(ch, unique("missing-x"), "k", "nowhere");
        CompletableFuture<Void> closing = CompletableFuture.runAsync(() -> {
            try {
                ch.close();
            } catch (IOException | ShutdownSignalException | TimeoutException e) {
                // The client reports the broker's 404 as what closed the channel.
            }
        });
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
        while (ch.isOpen() && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        release.countDown();
        closing.get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        assertFalse(ch.isOpen(), "the channel is still open");
        // A synchronous round trip on the other channel: a connection.close comes before its reply.
        try {
            bystander.queueDeclarePassive(q);
        } catch (IOException | AlreadyClosedException e) {
            // Reported just below.
        }
        assertNull(c.getCloseReason(), "the crossing channel.close closed the connection");
        publish(bystander, "", q, "still delivered");
        assertEquals("still delivered", text(bc.next("delivery on the bystander channel")));
        assertConnectionUsable(c);
    }

    @Test
    void redeclareWithAnotherTypeIs406() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String x = exchange(ch, "typed", "direct");
        IOException e = assertThrows(IOException.class, () -> ch.exchangeDeclare(x, "fanout"));
        assertEquals(406, channelCloseCode(e), "exchange redeclared with another type: PRECONDITION_FAILED");
        assertConnectionUsable(c);
    }

    @Test
    void redeclareQueueWithOtherArgumentsIs406() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String q = queue(ch, "args", Map.of("x-max-length", 10));
        IOException e = assertThrows(IOException.class,
                () -> ch.queueDeclare(q, false, false, false, Map.of("x-max-length", 20)));
        assertEquals(406, channelCloseCode(e), "queue redeclared with other arguments: PRECONDITION_FAILED");
        assertConnectionUsable(c);
    }

    @Test
    void redeclareQueueWithOtherDeadLetterExchangeIs406() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String dlx1 = exchange(ch, "dlx1", "fanout");
        String dlx2 = exchange(ch, "dlx2", "fanout");
        String q = queue(ch, "dlx-args", Map.of("x-dead-letter-exchange", dlx1));
        IOException e = assertThrows(IOException.class,
                () -> ch.queueDeclare(q, false, false, false, Map.of("x-dead-letter-exchange", dlx2)));
        assertEquals(406, channelCloseCode(e), "queue redeclared with another dead-letter exchange");
        assertConnectionUsable(c);
    }

    @Test
    void ackOfUnknownDeliveryTagIs406() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        CountDownLatch closed = new CountDownLatch(1);
        AtomicReference<ShutdownSignalException> why = watchShutdown(ch, closed);
        ch.basicAck(12345, false);
        assertTrue(closed.await(TIMEOUT_MS, TimeUnit.MILLISECONDS),
                "channel not closed after acking an unknown delivery tag");
        ShutdownSignalException s = why.get();
        assertNotNull(s);
        assertEquals(406, channelCloseCode(s), "unknown delivery tag: PRECONDITION_FAILED");
        assertConnectionUsable(c);
    }

    @Test
    void deleteOfQueueInUseWithIfUnusedIs406() throws Exception {
        Connection c = connect();
        Channel ch = c.createChannel();
        String q = queue(ch, "in-use");
        consume(ch, q);
        Channel other = c.createChannel();
        IOException e = assertThrows(IOException.class, () -> other.queueDelete(q, true, false));
        assertEquals(406, channelCloseCode(e), "queue.delete if-unused of a consumed queue");
        AMQP.Queue.DeclareOk ok = ch.queueDeclarePassive(q);
        assertEquals(1, ok.getConsumerCount());
        assertConnectionUsable(c);
    }
}
