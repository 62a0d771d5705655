package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;

import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.Message;
import jakarta.jms.Queue;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TextMessage;

import org.junit.jupiter.api.Test;

/** Request/reply with a temporary queue (a dynamic node) and replies by JMSReplyTo. */
class RequestReplyTest extends Support {

    @Test
    void aServiceRepliesToATemporaryQueue() throws Exception {
        String requests = declareQueue("requests");
        try (JMSContext client = context(); JMSContext service = context()) {
            TemporaryQueue replies = client.createTemporaryQueue();
            JMSConsumer replyConsumer = client.createConsumer(replies);
            TextMessage request = client.createTextMessage("ping");
            request.setJMSReplyTo(replies);
            request.setJMSCorrelationID("req-1");
            client.createProducer().send(client.createQueue(requests), request);

            Message got = service.createConsumer(service.createQueue(requests)).receive(TIMEOUT_MS);
            TextMessage reply = service.createTextMessage(got.getBody(String.class).toUpperCase());
            reply.setJMSCorrelationID(got.getJMSCorrelationID());
            // An anonymous producer: the destination travels in the message (the relay).
            service.createProducer().send(got.getJMSReplyTo(), reply);

            Message answer = replyConsumer.receive(TIMEOUT_MS);
            assertEquals("PING", answer.getBody(String.class));
            assertEquals("req-1", answer.getJMSCorrelationID());
            replyConsumer.close();
            replies.delete();
        }
    }

    @Test
    void anAnonymousProducerSendsToManyQueues() throws Exception {
        String a = declareQueue("anon-a");
        String b = declareQueue("anon-b");
        try (JMSContext ctx = context()) {
            Queue qa = ctx.createQueue(a);
            Queue qb = ctx.createQueue(b);
            var producer = ctx.createProducer();
            producer.send(qa, "to a");
            producer.send(qb, "to b");
            assertEquals("to a", ctx.createConsumer(qa).receiveBody(String.class, TIMEOUT_MS));
            assertEquals("to b", ctx.createConsumer(qb).receiveBody(String.class, TIMEOUT_MS));
        }
    }
}
