package wire

import "time"

// ExportRequest is POST /api/v1/export/postgres. The password travels in the
// body (use HTTPS off the node) and is never logged.
type ExportRequest struct {
	DSN      string `json:"dsn"` // without a password
	Schema   string `json:"schema,omitempty"`
	Password string `json:"password,omitempty"`
}

// ExportReply answers POST /api/v1/export/postgres.
type ExportReply struct {
	Node   string      `json:"node"`
	Target string      `json:"target"` // without the password
	Stats  ExportStats `json:"stats"`
}

// ExportStats is what one export copied.
type ExportStats struct {
	Index    uint64         `json:"index"` // the Raft index of the snapshot exported
	Machines int            `json:"machines"`
	Rows     map[string]int `json:"rows"`    // per table
	Created  bool           `json:"created"` // the tables were (re)created
	Duration time.Duration  `json:"duration_ns"`
}

// ExportStatusView is GET /api/v1/export/status.
type ExportStatusView struct {
	Node       string `json:"node"`
	Configured bool   `json:"configured"`
	// Role is mirror (this node runs it), standby (another node leads and
	// runs it) or off (no postgres_export in this node's configuration).
	Role   string        `json:"role"`
	Leader string        `json:"leader,omitempty"`
	Mirror *ExportStatus `json:"mirror,omitempty"`
}

// ExportStatus is the PostgreSQL mirror's position and lag.
type ExportStatus struct {
	Target        string  `json:"target"` // DSN without password, and schema
	Running       bool    `json:"running"`
	Connected     bool    `json:"connected"`
	ExportedIndex uint64  `json:"exported_index"` // the last Raft index in PostgreSQL
	AppliedIndex  uint64  `json:"applied_index"`  // the last Raft index in the local store
	LagIndexes    uint64  `json:"lag_indexes"`
	LagSeconds    float64 `json:"lag_seconds"` // the age of the oldest commit not yet exported
	// Changes counts change-log entries applied since the mirror started.
	Changes     uint64    `json:"changes"`
	FullExports int       `json:"full_exports"`
	LastExport  time.Time `json:"last_export,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}
