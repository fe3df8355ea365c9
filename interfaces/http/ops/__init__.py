"""The operator's resources: health, metrics, the OpenAPI document."""
