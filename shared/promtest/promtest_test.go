package promtest

import "testing"

func TestValue(t *testing.T) {
	text := []byte(`# HELP x_total X.
# TYPE x_total counter
x_total{code="OK",method="A"} 3
x_total{code="NotFound",method="A"} 1
y 2.5
`)
	tests := []struct {
		name   string
		metric string
		labels []string
		want   float64
		ok     bool
	}{
		{"labelled", "x_total", []string{"code", "NotFound"}, 1, true},
		{"first match", "x_total", []string{"method", "A"}, 3, true},
		{"unlabelled", "y", nil, 2.5, true},
		{"missing", "x_total", []string{"code", "Unknown"}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Value(text, tc.metric, tc.labels...)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Value = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
