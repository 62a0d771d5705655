

# Appended to aio-pika's tests/conftest.py by interop/aio-pika/run.sh: the broker under test
# is a ferryd on 127.0.0.1:$FERRY_PORT, not a RabbitMQ container started through Docker.
# These definitions replace the Docker check and the container fixture defined above.
def pytest_configure(config: pytest.Config) -> None:  # noqa: F811
    pass


@pytest.fixture(scope="session")
def rabbitmq_container() -> ContainerInfo:  # noqa: F811
    import os

    port = int(os.environ["FERRY_PORT"])
    return ContainerInfo(id="ferryd", ports={"5672/tcp": port}, host="127.0.0.1")
