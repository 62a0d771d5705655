package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.HashSet;
import java.util.Set;
import java.util.UUID;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Delivery;
import com.rabbitmq.client.Envelope;

import org.junit.jupiter.api.Test;

/** Request/reply: reply-to naming a server-named exclusive queue, correlation ids. */
class RpcTest extends RabbitSupport {

    /** The server side: squares the number in each request and answers on reply-to. */
    private String startServer() throws Exception {
        Channel server = connect().createChannel();
        String requests = queue(server, "rpc");
        server.basicQos(1);
        server.basicConsume(requests, false, new DefaultConsumer(server) {
            @Override
            public void handleDelivery(String tag, Envelope env, AMQP.BasicProperties props, byte[] body)
                    throws IOException {
                long n = Long.parseLong(text(body));
                AMQP.BasicProperties reply = new AMQP.BasicProperties.Builder()
                        .correlationId(props.getCorrelationId()).build();
                server.basicPublish("", props.getReplyTo(), reply, bytes(Long.toString(n * n)));
                server.basicAck(env.getDeliveryTag(), false);
            }
        });
        return requests;
    }

    @Test
    void requestReplyOverServerNamedExclusiveQueue() throws Exception {
        String requests = startServer();
        Connection c = connect();
        Channel client = c.createChannel();
        AMQP.Queue.DeclareOk ok = client.queueDeclare(); // server-named, exclusive, auto-delete
        String replyTo = ok.getQueue();
        assertTrue(replyTo.startsWith("amq.gen-"), "server-named queue: " + replyTo);
        Collector replies = consume(client, replyTo);

        Set<String> pending = new HashSet<>();
        for (int i = 1; i <= 5; i++) {
            String id = UUID.randomUUID().toString();
            pending.add(id + "=" + (i * i));
            client.basicPublish("", requests,
                    new AMQP.BasicProperties.Builder().replyTo(replyTo).correlationId(id).build(),
                    bytes(Integer.toString(i)));
        }
        Set<String> got = new HashSet<>();
        for (int i = 0; i < 5; i++) {
            Delivery d = replies.next("reply " + (i + 1));
            got.add(d.getProperties().getCorrelationId() + "=" + text(d));
        }
        assertEquals(pending, got);
    }

    @Test
    void exclusiveQueueBelongsToItsConnection() throws Exception {
        Connection owner = connect();
        String q = owner.createChannel().queueDeclare().getQueue();

        Channel other = connect().createChannel();
        IOException e = assertThrows(IOException.class,
                () -> other.basicConsume(q, true, new DefaultConsumer(other)));
        assertEquals(405, channelCloseCode(e), "consume from another connection: RESOURCE_LOCKED");

        owner.close();
        Channel probe = connect().createChannel();
        IOException gone = assertThrows(IOException.class, () -> probe.queueDeclarePassive(q));
        assertEquals(404, channelCloseCode(gone), "exclusive queue outlived its connection");
        assertFalse(probe.isOpen());
    }
}
