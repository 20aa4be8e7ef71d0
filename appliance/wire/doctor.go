package wire

import "time"

// DoctorReport is GET /api/v1/doctor: a node's checks, as an operator
// would make them, each with what to do about a failure.
type DoctorReport struct {
	Node   string        `json:"node"`
	Time   time.Time     `json:"time"`
	OK     bool          `json:"ok"` // no check failed (warnings allowed)
	Checks []DoctorCheck `json:"checks"`
}

// DoctorCheck is one check: ok, warn or fail.
type DoctorCheck struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Doctor check outcomes.
const (
	DoctorOK   = "ok"
	DoctorWarn = "warn"
	DoctorFail = "fail"
)
