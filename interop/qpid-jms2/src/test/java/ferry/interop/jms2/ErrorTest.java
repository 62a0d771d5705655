package ferry.interop.jms2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import jakarta.jms.InvalidDestinationRuntimeException;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSRuntimeException;

import org.junit.jupiter.api.Test;

/** What the broker refuses, and that the connection carries on afterwards. */
class ErrorTest extends Support {

    @Test
    void consumingFromAQueueThatDoesNotExistFails() throws Exception {
        try (JMSContext ctx = context()) {
            assertThrows(InvalidDestinationRuntimeException.class,
                    () -> ctx.createConsumer(ctx.createQueue(unique("missing"))));
            String name = declareQueue("after-error");
            ctx.createProducer().send(ctx.createQueue(name), "still fine");
            assertEquals("still fine", ctx.createConsumer(ctx.createQueue(name))
                    .receiveBody(String.class, TIMEOUT_MS));
        }
    }

    @Test
    void sendingToAQueueThatDoesNotExistFails() throws Exception {
        try (JMSContext ctx = context()) {
            assertThrows(JMSRuntimeException.class,
                    () -> ctx.createProducer().send(ctx.createQueue(unique("missing")), "lost"));
        }
    }
}
