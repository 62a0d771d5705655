package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.GetResponse;

import org.junit.jupiter.api.Test;

/** Priority queues, x-expires and exchange-to-exchange bindings. */
class QueueFeaturesTest extends RabbitSupport {

    static List<String> drain(Channel ch, String q) throws IOException {
        List<String> got = new ArrayList<>();
        for (GetResponse r = ch.basicGet(q, true); r != null; r = ch.basicGet(q, true)) {
            got.add(text(r.getBody()));
        }
        return got;
    }

    @Test
    void priorityQueueDeliversHighestFirst() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "prio", Map.of("x-max-priority", 10));
        int[] priorities = {1, 10, 5, 10, 0};
        String[] bodies = {"p1", "p10-a", "p5", "p10-b", "p0"};
        for (int i = 0; i < bodies.length; i++) {
            ch.basicPublish("", q, new AMQP.BasicProperties.Builder().priority(priorities[i]).build(),
                    bytes(bodies[i]));
        }
        assertEquals(List.of("p10-a", "p10-b", "p5", "p1", "p0"), drain(ch, q));
    }

    @Test
    void unusedQueueExpires() throws Exception {
        Channel ch = connect().createChannel();
        String q = queue(ch, "expires", Map.of("x-expires", 300));
        Thread.sleep(800);
        IOException e = assertThrows(IOException.class, () -> ch.queueDeclarePassive(q));
        assertEquals(404, channelCloseCode(e));
    }

    @Test
    void invalidExpiresIsPreconditionFailed() throws Exception {
        Channel ch = connect().createChannel();
        IOException e = assertThrows(IOException.class,
                () -> ch.queueDeclare(unique("bad"), false, false, false, Map.of("x-expires", 0)));
        assertEquals(406, channelCloseCode(e));
    }

    @Test
    void exchangeToExchangeBindingsRouteOnward() throws Exception {
        Channel ch = connect().createChannel();
        String src = exchange(ch, "src", "topic");
        String dst = exchange(ch, "dst", "fanout");
        String q = queue(ch, "e2e");
        ch.exchangeBind(dst, src, "eu.#");
        ch.queueBind(q, dst, "");
        // A path back to the source: the message still reaches the queue once.
        ch.exchangeBind(src, dst, "eu.#");
        publish(ch, src, "eu.fr", "routed");
        publish(ch, src, "us.ny", "unmatched");
        assertEquals(List.of("routed"), drain(ch, q));
        ch.exchangeUnbind(dst, src, "eu.#");
        publish(ch, src, "eu.fr", "after-unbind");
        assertNull(ch.basicGet(q, true));
        assertEquals(Boolean.TRUE, ((Map<?, ?>) connect().getServerProperties().get("capabilities"))
                .get("exchange_exchange_bindings"));
    }
}
