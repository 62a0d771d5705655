package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.BuiltinExchangeType;
import com.rabbitmq.client.Channel;

import org.junit.jupiter.api.Test;

/** Publish/subscribe over fanout, topic and headers exchanges to server-named queues. */
class PubSubTest extends RabbitSupport {

    @Test
    void fanoutCopiesEveryMessageToEveryBoundQueue() throws Exception {
        Channel ch = connect().createChannel();
        String x = exchange(ch, "fanout", "fanout");
        Channel sub = connect().createChannel();
        String q1 = sub.queueDeclare().getQueue();
        String q2 = sub.queueDeclare().getQueue();
        sub.queueBind(q1, x, "");
        sub.queueBind(q2, x, "ignored-key");
        Collector c1 = consume(sub, q1);
        Collector c2 = consume(sub, q2);

        for (String s : List.of("one", "two", "three")) {
            publish(ch, x, "any.key", s);
        }
        publish(ch, x, "", "end");
        assertEquals(List.of("one", "two", "three"), c1.untilMarker("end", "subscriber 1"));
        assertEquals(List.of("one", "two", "three"), c2.untilMarker("end", "subscriber 2"));
    }

    @Test
    void topicWildcards() throws Exception {
        Channel ch = connect().createChannel();
        String x = exchange(ch, "topic", BuiltinExchangeType.TOPIC.getType());
        Channel sub = connect().createChannel();
        String q1 = sub.queueDeclare().getQueue();
        String q2 = sub.queueDeclare().getQueue();
        String all = sub.queueDeclare().getQueue();
        sub.queueBind(q1, x, "*.orange.*");
        sub.queueBind(q2, x, "*.*.rabbit");
        sub.queueBind(q2, x, "lazy.#");
        sub.queueBind(all, x, "#");
        Collector c1 = consume(sub, q1);
        Collector c2 = consume(sub, q2);
        Collector cAll = consume(sub, all);

        List<String> keys = List.of(
                "quick.orange.rabbit",      // q1, q2
                "lazy.orange.elephant",     // q1, q2
                "quick.orange.fox",         // q1
                "lazy.brown.fox",           // q2
                "lazy.pink.rabbit",         // q2 once, though both its bindings match
                "quick.brown.fox",          // none
                "orange",                   // none
                "quick.orange.male.rabbit", // none
                "lazy.orange.male.rabbit",  // q2
                "lazy");                    // q2: # matches zero words
        for (String k : keys) {
            publish(ch, x, k, k);
        }
        publish(ch, x, "lazy.orange.marker", "end");

        assertEquals(List.of("quick.orange.rabbit", "lazy.orange.elephant", "quick.orange.fox"),
                c1.untilMarker("end", "*.orange.*"));
        assertEquals(List.of("quick.orange.rabbit", "lazy.orange.elephant", "lazy.brown.fox",
                "lazy.pink.rabbit", "lazy.orange.male.rabbit", "lazy"),
                c2.untilMarker("end", "*.*.rabbit + lazy.#"));
        assertEquals(keys, cAll.untilMarker("end", "#"));
    }

    @Test
    void headersExchangeAllAndAny() throws Exception {
        Channel ch = connect().createChannel();
        String x = exchange(ch, "headers", BuiltinExchangeType.HEADERS.getType());
        Channel sub = connect().createChannel();
        String qAll = sub.queueDeclare().getQueue();
        String qAny = sub.queueDeclare().getQueue();
        String qInt = sub.queueDeclare().getQueue();
        sub.queueBind(qAll, x, "", Map.of("x-match", "all", "format", "pdf", "type", "report"));
        sub.queueBind(qAny, x, "", Map.of("x-match", "any", "format", "pdf", "type", "log"));
        sub.queueBind(qInt, x, "", Map.of("x-match", "all", "n", 42));
        Collector cAll = consume(sub, qAll);
        Collector cAny = consume(sub, qAny);
        Collector cInt = consume(sub, qInt);

        send(ch, x, "pdf-report", Map.of("format", "pdf", "type", "report"));    // all, any
        send(ch, x, "pdf-log", Map.of("format", "pdf", "type", "log"));          // any
        send(ch, x, "zip-log", Map.of("format", "zip", "type", "log"));          // any
        send(ch, x, "zip-other", Map.of("format", "zip", "type", "other"));      // none
        send(ch, x, "pdf-only", Map.of("format", "pdf"));                        // any
        send(ch, x, "n42", Map.of("n", 42, "format", "zip"));                    // int
        send(ch, x, "n43", Map.of("n", 43));                                     // none
        send(ch, x, "end", Map.of("format", "pdf", "type", "report", "n", 42));  // all three

        assertEquals(List.of("pdf-report"), cAll.untilMarker("end", "x-match all"));
        assertEquals(List.of("pdf-report", "pdf-log", "zip-log", "pdf-only"),
                cAny.untilMarker("end", "x-match any"));
        assertEquals(List.of("n42"), cInt.untilMarker("end", "x-match all on an int header"));
    }

    private static void send(Channel ch, String x, String body, Map<String, Object> headers)
            throws Exception {
        ch.basicPublish(x, "", new AMQP.BasicProperties.Builder().headers(headers).build(), bytes(body));
    }
}
