package health

import (
	"fmt"
	"testing"
)

// TestBreakerThresholdIsExactInIntegersAtEverySizeAndShare sweeps every
// cluster size up to 5,000 nodes and the shares 0.01 to 1.00: the Breaker
// must trip at exactly the smallest count n with n/total >= share, stated
// here in integers (100n >= k*total for the share k/100), and not one node
// earlier. As float64 products, 0.55*100 is 55.00000000000001, and 54 sizes
// up to 2,000 missed their threshold by one node.
func TestBreakerThresholdIsExactInIntegersAtEverySizeAndShare(t *testing.T) {
	const maxNodes = 5000
	for k := 1; k <= 100; k++ {
		share := float64(k) / 100
		least, millionths := Breaker{UnhealthyShare: share, MinUnhealthy: 1}.thresholds()
		if least != 1 {
			t.Fatalf("share %v: MinUnhealthy 1 read as %d", share, least)
		}
		for total := 1; total <= maxNodes; total++ {
			first := (k*total + 99) / 100 // the fewest not-Ready nodes that make up the share
			if got := (nodeHealth{total: total, notReady: first}).disruptedAt(least, millionths); !got {
				t.Fatalf("share %v, %d of %d nodes not Ready: the Breaker did not trip", share, first, total)
			}
			if first > 1 {
				if got := (nodeHealth{total: total, notReady: first - 1}).disruptedAt(least, millionths); got {
					t.Fatalf("share %v, %d of %d nodes not Ready: the Breaker tripped below the share", share, first-1, total)
				}
			}
		}
	}
}

// TestBreakerShareRoundsToTheNearestMillionth pins the documented reading of
// a share that is not a round number: to the nearest millionth, so that a
// share computed as a sum of floats (0.1+0.2) is the share its author meant.
func TestBreakerShareRoundsToTheNearestMillionth(t *testing.T) {
	for _, tt := range []struct {
		share float64
		want  int64
	}{
		{0, defaultUnhealthyMillionths},
		{0.55, 550_000},
		{0.1 + 0.2, 300_000},
		{1.0 / 3, 333_333},
		{0.0000005, 1},
		{1, 1_000_000},
	} {
		t.Run(fmt.Sprint(tt.share), func(t *testing.T) {
			_, got := Breaker{UnhealthyShare: tt.share}.thresholds()
			if got != tt.want {
				t.Fatalf("share %v read as %d millionths, want %d", tt.share, got, tt.want)
			}
		})
	}
}
