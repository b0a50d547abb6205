package health

// The DeleteBudget is the release stage's: it is spent as each DELETE is
// sent (see send).

import (
	"fmt"
	"sync"
	"time"
)

// DeleteBudget limits force deletes to a number per sliding time window.
// Checkers that share one DeleteBudget share the limit. Make one with
// NewDeleteBudget: a zero DeleteBudget, which would allow no delete at all,
// is refused by New. A DeleteBudget is safe for concurrent use.
type DeleteBudget struct {
	max    int
	window time.Duration

	mu    sync.Mutex
	spent []time.Time // when the last max deletes were sent, oldest first
}

// NewDeleteBudget returns a budget of max force deletes per window.
func NewDeleteBudget(max int, window time.Duration) (*DeleteBudget, error) {
	if max <= 0 || window <= 0 {
		return nil, fmt.Errorf("podhealth: NewDeleteBudget(%d, %v): both must be positive", max, window)
	}
	return &DeleteBudget{max: max, window: window}, nil
}

// Take spends one action of the budget at now, or returns false and how
// long until the next one is available. A Checker takes one for each force
// delete; a caller that guards other actions with the same budget (the
// out-of-service taints of podhealth-controller) shares the limit with
// the Checkers. A nil budget always allows.
func (b *DeleteBudget) Take(now time.Time) (ok bool, retryAfter time.Duration) {
	if b == nil {
		return true, 0
	}
	return b.take(now)
}

// take spends one delete at now, or says when the next one is available.
func (b *DeleteBudget) take(now time.Time) (ok bool, retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.spent) > 0 && !now.Before(b.spent[0].Add(b.window)) {
		b.spent = b.spent[1:]
	}
	if len(b.spent) >= b.max {
		return false, b.spent[0].Add(b.window).Sub(now)
	}
	b.spent = append(b.spent, now)
	return true, 0
}
