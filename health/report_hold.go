package health

// Hold is the report's word for why the policy kept a dead pod
// (PodReport.HeldBack).

// HoldReason says why a dead pod was held back (Outcome HeldBack): the kind
// of reason, for code to switch on; Hold.Detail says the rest, for people.
type HoldReason int

const (
	// NotHeld: the pod was not held back.
	NotHeld HoldReason = iota
	// HeldByAnnotation: the pod carries podhealth.io/force-delete=never.
	HeldByAnnotation
	// HeldMalformed: the pod is not an object the API server serves (two of
	// its conditions share a type), so nothing in it is trusted.
	HeldMalformed
	// HeldForFencing: the pod needs fencing evidence (see Fencing), and
	// neither its verdict nor any Fencer proves that its containers cannot
	// run; the detail joins what the fencers said they miss or await.
	// Tainting its node node.kubernetes.io/out-of-service once the node is
	// powered off, or deleting the node, lets it go.
	HeldForFencing
	// HeldByBreaker: the Breaker is open: an unusual share of nodes is not
	// Ready, or node health cannot be read.
	HeldByBreaker
	// HeldByBudget: the DeleteBudget is spent for now; Report.RetryAfter
	// says when the next force delete is allowed.
	HeldByBudget
	// HeldUnidentified: the pod has no name or no UID, so its force delete
	// could not carry a UID precondition and might hit a newer pod of the
	// same name. The API server never serves such a pod; fake clientsets,
	// which ignore generateName, do.
	HeldUnidentified
)

var holdReasonNames = [...]string{
	NotHeld:          "NotHeld",
	HeldByAnnotation: "HeldByAnnotation",
	HeldMalformed:    "HeldMalformed",
	HeldForFencing:   "HeldForFencing",
	HeldByBreaker:    "HeldByBreaker",
	HeldByBudget:     "HeldByBudget",
	HeldUnidentified: "HeldUnidentified",
}

func (r HoldReason) String() string {
	if r < 0 || int(r) >= len(holdReasonNames) {
		return "HoldReason(?)"
	}
	return holdReasonNames[r]
}

// Hold is why a dead pod was held back: PodReport.HeldBack. The zero Hold
// means the pod was not held back.
type Hold struct {
	Reason HoldReason
	// Detail is the evidence, for logs, events and people: which
	// StatefulSet or claim needs fencing, how many nodes tripped the
	// breaker, the budget's size. Code switches on Reason, never on
	// Detail, whose wording may change.
	Detail string
}

// String is the hold as one sentence: its reason's words, then the detail.
func (h Hold) String() string {
	var what string
	switch h.Reason {
	case NotHeld:
		return ""
	case HeldByAnnotation:
		what = "opted out by annotation"
	case HeldMalformed:
		what = "malformed"
	case HeldForFencing:
		what = "needs fencing evidence (its node gone or out of service, or a fencer's proof)"
	case HeldByBreaker:
		what = "breaker open"
	case HeldByBudget:
		what = "force-delete budget used up"
	case HeldUnidentified:
		what = "unidentified pod"
	default:
		what = h.Reason.String()
	}
	if h.Detail == "" {
		return what
	}
	return what + ": " + h.Detail
}
