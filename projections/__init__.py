"""Read models: projections of the event store into query tables."""
