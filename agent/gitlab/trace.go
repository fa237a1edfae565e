package gitlab

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracedClient returns hc (nil: a client like GitLab's default one) with a
// transport that gives every HTTP request to GitLab, retries included, a
// client span: a child of the span in the request's context, the gRPC
// call's. The span records the method, URL (whose query never holds the
// token: it goes in a header) and status, never headers.
//
// No trace context is sent: GitLab is a third party, and a traceparent
// would tell it the agent's trace ids. With tp nil, hc is returned as is.
func tracedClient(hc *http.Client, tp trace.TracerProvider) *http.Client {
	if tp == nil {
		return hc
	}
	c := &http.Client{}
	if hc != nil {
		*c = *hc
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	c.Transport = otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator()),
		// Metrics are Prometheus's job (--metrics-listen).
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		// Low cardinality: the path holds project names and ids.
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "GitLab " + r.Method }),
	)
	return c
}
