package health

import "context"

// MultiObserver returns an Observer that hands each report to every one of
// observers, in the order given, so that one Checker can feed metrics,
// events and logs at once. Nil entries, typed nil pointers included, are
// left out, so that optional observers can be listed unconditionally;
// with none left, MultiObserver returns nil, which Options.Observer reads
// as nobody. A single observer left is returned as it is.
//
// Each observer sees the same read-only PodReport. A panic in one is not
// recovered, as in any Observer (see Checker): the observers after it do
// not hear that report. The result is safe for concurrent use when every
// observer is, as the Observer contract requires.
func MultiObserver(observers ...Observer) Observer {
	var kept multiObserver
	for _, o := range observers {
		switch o := o.(type) {
		case nil:
		case multiObserver: // flattened, so that nesting costs no extra call
			kept = append(kept, o...)
		default:
			if !isNil(o) {
				kept = append(kept, o)
			}
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		return kept[0]
	}
	return kept
}

// multiObserver is what MultiObserver returns for two observers or more.
type multiObserver []Observer

var _ Observer = multiObserver(nil)

func (m multiObserver) Observe(ctx context.Context, r PodReport) {
	for _, o := range m {
		o.Observe(ctx, r)
	}
}
