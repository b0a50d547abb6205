package harness

import (
	"time"
)

// KlogTime returns the time in the header of a klog text line, such as the
// operator's "I1129 10:11:12.123456   4242 controller.go:310] ...". klog
// writes no year: the year is the one of now, or the one before when that
// would put the line in the future (a run over New Year). The time is local,
// as klog writes it.
func KlogTime(line string, now time.Time) (time.Time, bool) {
	const layout = "0102 15:04:05.000000"
	if len(line) < 1+len(layout) {
		return time.Time{}, false
	}
	switch line[0] {
	case 'I', 'W', 'E', 'F':
	default:
		return time.Time{}, false
	}
	t, err := time.ParseInLocation(layout, line[1:1+len(layout)], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	year := now.Year()
	t = time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.Local)
	if t.After(now.Add(24 * time.Hour)) {
		t = t.AddDate(-1, 0, 0)
	}
	return t, true
}
