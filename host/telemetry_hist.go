package host

import (
	"context"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The agenticdriver.duration histogram (wire-extensions §11.2) is kept by
// the host in atomic buckets and handed to the SDK's periodic reader as
// an external Producer, which exports it with the SDK's other metrics.
//
// Why: a synchronous SDK histogram resolves its attribute set and takes
// its aggregator's lock on every measurement. That is 0.3 µs in a tight
// loop, and in a busy host, where those structures are cold, it cost the
// fixture's JSON runs 1.5 % of their throughput (the telemetry bench,
// with every other record left out). Here a host record is an index and
// four atomic operations. What is exported is what the SDK exported: the
// same name, unit, dimensions, cumulative temporality, default bucket
// bounds, count, sum, min and max.

// durBounds are the SDK's default explicit bucket bounds, in ms.
var durBounds = [...]float64{0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000}

// durHist is one series of agenticdriver.duration: a kind and outcome.
type durHist struct {
	// buckets[i] counts values v with durBounds[i-1] < v <= durBounds[i]
	// (the last: above every bound), as the SDK counts them.
	buckets [len(durBounds) + 1]atomic.Uint64
	// sum, lo and hi are float64 bits; lo and hi start at +Inf and -Inf
	// (init), so the first observation sets both.
	sum, lo, hi atomic.Uint64
}

func (h *durHist) init() {
	h.lo.Store(math.Float64bits(math.Inf(1)))
	h.hi.Store(math.Float64bits(math.Inf(-1)))
}

func (h *durHist) observe(v float64) {
	h.buckets[sort.SearchFloat64s(durBounds[:], v)].Add(1)
	addFloat(&h.sum, v)
	casFloat(&h.lo, v, func(old float64) bool { return v < old })
	casFloat(&h.hi, v, func(old float64) bool { return v > old })
}

// addFloat adds v to the float64 in bits.
func addFloat(bits *atomic.Uint64, v float64) {
	for {
		old := bits.Load()
		if bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// casFloat stores v in bits while better(current) holds.
func casFloat(bits *atomic.Uint64, v float64, better func(float64) bool) {
	for {
		old := bits.Load()
		if !better(math.Float64frombits(old)) || bits.CompareAndSwap(old, math.Float64bits(v)) {
			return
		}
	}
}

// point is h's cumulative data point, ok false while h has seen nothing.
// Its count is the sum of its buckets, read once each, so the two always
// agree (OTLP requires it); a measurement racing the read may be in the
// buckets and not yet in the sum, or the reverse, until the next export.
func (h *durHist) point(set attribute.Set, start, now time.Time) (metricdata.HistogramDataPoint[float64], bool) {
	counts := make([]uint64, len(h.buckets))
	var n uint64
	for i := range h.buckets {
		counts[i] = h.buckets[i].Load()
		n += counts[i]
	}
	if n == 0 {
		return metricdata.HistogramDataPoint[float64]{}, false
	}
	return metricdata.HistogramDataPoint[float64]{
		Attributes: set, StartTime: start, Time: now,
		Count: n, Bounds: durBounds[:], BucketCounts: counts,
		Min: metricdata.NewExtrema(math.Float64frombits(h.lo.Load())),
		Max: metricdata.NewExtrema(math.Float64frombits(h.hi.Load())),
		Sum: math.Float64frombits(h.sum.Load()),
	}, true
}

// durations is agenticdriver.duration: a series per kind and outcome
// (phase "total"), produced for the SDK's reader (sdkmetric.Producer).
type durations struct {
	start time.Time
	hists [numKinds][numOutcomes]durHist
	sets  [numKinds][numOutcomes]attribute.Set
}

var _ sdkmetric.Producer = (*durations)(nil)

func newDurations(sets [numKinds][numOutcomes]attribute.Set) *durations {
	ds := &durations{start: time.Now(), sets: sets}
	for k := range ds.hists {
		for o := range ds.hists[k] {
			ds.hists[k][o].init()
		}
	}
	return ds
}

// record observes a host record's duration d.
func (ds *durations) record(kind, outcome int, d time.Duration) {
	ds.hists[kind][outcome].observe(float64(d) / float64(time.Millisecond))
}

// Produce returns the histogram in the adhost scope, as the SDK's meter
// would have; nothing before the first host record.
func (ds *durations) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	now := time.Now()
	var pts []metricdata.HistogramDataPoint[float64]
	for k := range ds.hists {
		for o := range ds.hists[k] {
			if p, ok := ds.hists[k][o].point(ds.sets[k][o], ds.start, now); ok {
				pts = append(pts, p)
			}
		}
	}
	if len(pts) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{
		Scope: instrumentation.Scope{Name: "adhost"},
		Metrics: []metricdata.Metrics{{
			Name: "agenticdriver.duration", Unit: "ms",
			Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: pts},
		}},
	}}, nil
}
