"""What runs the processes: gunicorn config, the supervisor, the projection and webhook workers, logs,
the metrics registry and the health probes."""
