package ferry.interop.rabbitmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Return;

import org.junit.jupiter.api.Test;

/** Mandatory publishes that route nowhere come back as basic.return (312 NO_ROUTE). */
class ReturnTest extends RabbitSupport {

    @Test
    void mandatoryPublishToNowhereIsReturned() throws Exception {
        Channel ch = connect().createChannel();
        BlockingQueue<Return> returns = new LinkedBlockingQueue<>();
        ch.addReturnListener(returns::add);
        String missing = unique("no-such-queue");
        AMQP.BasicProperties props = new AMQP.BasicProperties.Builder()
                .contentType("text/plain").correlationId("c-1").build();
        ch.basicPublish("", missing, true, props, bytes("lost"));

        Return r = returns.poll(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        assertNotNull(r, "no basic.return within " + TIMEOUT_MS + " ms");
        assertEquals(312, r.getReplyCode());
        assertEquals("NO_ROUTE", r.getReplyText());
        assertEquals("", r.getExchange());
        assertEquals(missing, r.getRoutingKey());
        assertEquals("lost", text(r.getBody()));
        assertEquals("text/plain", r.getProperties().getContentType());
        assertEquals("c-1", r.getProperties().getCorrelationId());
        assertTrue(ch.isOpen(), "a return must not close the channel");
    }

    @Test
    void unroutableOnDirectExchangeReturnedBeforeConfirm() throws Exception {
        Channel ch = connect().createChannel();
        String x = exchange(ch, "direct", "direct");
        String q = queue(ch, "bound");
        ch.queueBind(q, x, "bound-key");
        BlockingQueue<Return> returns = new LinkedBlockingQueue<>();
        ch.addReturnListener(returns::add);
        ch.confirmSelect();

        ch.basicPublish(x, "bound-key", true, null, bytes("routed"));
        ch.basicPublish(x, "other-key", true, null, bytes("unroutable"));
        ch.waitForConfirmsOrDie(TIMEOUT_MS);
        // RabbitMQ sends basic.return before the basic.ack of the same publish.
        Return r = returns.poll();
        assertNotNull(r, "basic.return not received before the publish was confirmed");
        assertEquals("unroutable", text(r.getBody()));
        assertEquals(x, r.getExchange());
        assertEquals("other-key", r.getRoutingKey());
        assertNull(returns.poll(), "the routed message was returned too");
        assertEquals(1, ch.queueDeclarePassive(q).getMessageCount());
    }
}
