"""Test helpers that start real parts (a Kafka broker, ...): one module each, a fixture
that starts the process and stops it by its PID."""
