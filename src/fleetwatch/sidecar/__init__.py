"""The runtime: scraping, the HTTP server, self-metrics, SLO routes, configuration."""
