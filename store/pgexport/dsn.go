package pgexport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Target is a PostgreSQL database and schema to export into.
type Target struct {
	// DSN is a libpq connection string or postgres:// URL, without a
	// password (see Password; PGPASSWORD and ~/.pgpass also apply).
	DSN string
	// Schema is the PostgreSQL schema the tables live in (default rollcall).
	Schema string
	// Password, when set, overrides any other source.
	Password string
	// Node names who wrote the rows, recorded in export_state.
	Node string
}

// DefaultSchema is the schema used when none is given.
const DefaultSchema = "rollcall"

// ErrConnect marks a failure to reach or log in to PostgreSQL.
var ErrConnect = errors.New("cannot connect to PostgreSQL")

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CheckSchema accepts a plain lowercase PostgreSQL identifier.
func CheckSchema(s string) error {
	if !schemaPattern.MatchString(s) {
		return fmt.Errorf("schema %q must be a lowercase identifier: letters, digits and _, not starting with a digit, at most 63 characters", s)
	}
	return nil
}

func (t Target) schema() string {
	if t.Schema == "" {
		return DefaultSchema
	}
	return t.Schema
}

// Check validates the target without connecting: the DSN parses, carries no
// password, and the schema is a plain identifier.
func (t Target) Check() error {
	if t.DSN == "" {
		return errors.New("dsn is required (postgres://user@host/db or host=… dbname=…)")
	}
	if DSNHasPassword(t.DSN) {
		return errors.New("the dsn must not carry a password (it would end up in shell history, process lists and logs): put it in a password file or PGPASSWORD")
	}
	if _, err := pgx.ParseConfig(t.DSN); err != nil {
		return fmt.Errorf("dsn %s does not parse: %w", RedactDSN(t.DSN), err)
	}
	return CheckSchema(t.schema())
}

// String is the target for logs: the DSN without any password.
func (t Target) String() string { return RedactDSN(t.DSN) + " schema " + t.schema() }

func (t Target) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(t.DSN)
	if err != nil {
		return nil, t.scrub(fmt.Errorf("dsn %s does not parse: %w", RedactDSN(t.DSN), err))
	}
	if t.Password != "" {
		cfg.Password = t.Password
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "rollcall-export"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, t.scrub(fmt.Errorf("%w at %s: %w", ErrConnect, RedactDSN(t.DSN), err))
	}
	return conn, nil
}

// scrub makes sure no error text carries the password, whatever the
// driver put in it.
func (t Target) scrub(err error) error {
	if err == nil || t.Password == "" || !strings.Contains(err.Error(), t.Password) {
		return err
	}
	return &scrubbed{err: err, secret: t.Password}
}

type scrubbed struct {
	err    error
	secret string
}

func (s *scrubbed) Error() string { return strings.ReplaceAll(s.err.Error(), s.secret, "xxxxx") }
func (s *scrubbed) Unwrap() error { return s.err }

var (
	kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)
)

// RedactDSN returns a DSN safe to log: any password, in the URL's user
// information, a password= query parameter or a password= keyword, becomes
// xxxxx.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparsable postgres URL)"
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		for k := range q {
			if strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword") {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

// DSNHasPassword reports whether a DSN carries a password itself.
func DSNHasPassword(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return strings.Contains(dsn, "@") // cannot tell: assume the worst
		}
		if _, ok := u.User.Password(); ok {
			return true
		}
		for k := range u.Query() {
			if strings.EqualFold(k, "password") {
				return true
			}
		}
		return false
	}
	return kvPassword.MatchString(dsn)
}
