// Package observability checks the observability artefacts in
// deploy/observability and the example alert rules against the code: every
// aegis_* metric a Grafana panel or an alert rule queries must be one a
// service defines (a prometheus.*Opts literal or a prometheus.NewDesc in
// services/ or pkg/, with a histogram's _bucket/_sum/_count series, or a
// Kafka client metric kafkax.Metrics registers). A panel on a metric nobody
// exports shows "No data" forever, and a rule on one never fires — both look
// like "all is well". The dashboard's panels and queries use its datasource
// variable, select series by the service and pod labels (never job), and
// include the triage panels. It has no non-test code: the check is the test.
package observability
