"""The transparent proxy: its own WSGI app and listener (`{proxy_url}/{slug}/*`)."""
