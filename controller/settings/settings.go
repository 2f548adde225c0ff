// Package settings is the controller's configuration: one typed struct, filled from the
// environment at start-up. The same struct generates the bundle's values JSON Schema
// (schema/values.schema.json), so a setting cannot exist in the bundle and not in the binary.
//
// Each field names its environment variable in an `env` tag and its default in a `default`
// tag; Load reads them by reflection, so adding a setting is adding a field.
package settings

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings is everything the controller can be told. Karpenter core reads some of the same
// variables itself (ports, log level, leader election, batching, feature gates); they are
// declared here too so that they are validated before start-up and appear in the values schema.
type Settings struct {
	// Region is the CKE region advertised as the zone of every instance type; also the
	// price-system zone_id when the refresher is enabled.
	//
	// A refused region stops the controller: it says where the cluster is, which no default
	// can know, and a guess would label and price every node launched under it.
	Region string `json:"region" env:"CLEVER_CLOUD_REGION" default:"par" pattern:"^[a-z][a-z0-9-]*$" fallback:"none"`
	// Topology restricts the dynamic flavor list to one CKE topology (DISTRIBUTED,
	// ALL_IN_ONE, DEDICATED_COMPUTE). Empty takes the union of every topology's list. It
	// applies only while the price refresher can read the product listing, which answers 401
	// without a token since 2026-09: it is then ignored and every catalogue flavor offered.
	Topology string `json:"topology,omitempty" env:"CLEVER_CLOUD_TOPOLOGY" default:"" pattern:"^([A-Z][A-Z0-9_]*)?$"`
	// LogLevel is debug, info or error.
	LogLevel string `json:"logLevel" env:"LOG_LEVEL" default:"info" enum:"debug,info,error"`
	// MetricsPort is the port of the /metrics endpoint.
	MetricsPort int `json:"metricsPort" env:"METRICS_PORT" default:"8080" min:"1" max:"65535"`
	// HealthProbePort is the port of the liveness and readiness probes.
	HealthProbePort int `json:"healthProbePort" env:"HEALTH_PROBE_PORT" default:"8081" min:"1" max:"65535"`
	// DisableLeaderElection runs without a leader lease; for single-replica development only.
	DisableLeaderElection bool `json:"disableLeaderElection" env:"DISABLE_LEADER_ELECTION" default:"false"`
	// BatchMaxDuration is the longest pod batching window before provisioning.
	BatchMaxDuration Duration `json:"batchMaxDuration" env:"BATCH_MAX_DURATION" default:"10s"`
	// BatchIdleDuration ends a batching window when no new pending pod arrived for that long.
	// The quota steering looks at the pending pods at least twice per this duration, so a
	// scheduling pass is steered by every pod it places.
	BatchIdleDuration Duration `json:"batchIdleDuration" env:"BATCH_IDLE_DURATION" default:"1s"`
	// CostSteering lets the provider choose, for each scheduling pass, the flavors Karpenter
	// may use so that its packing of the pending pods yields the cheapest fleet: without it,
	// many small pods fill a few of the largest flavors, whose memory per vCPU they do not use
	// and which is paid for all the same (docs/cost.md). A flavor a pending pod needs is never
	// hidden. Turn it off to let Karpenter choose among every flavor, as it does on its own.
	CostSteering bool `json:"costSteering" env:"COST_STEERING" default:"true"`
	// CostReplacement replaces a running node whose shape costs more than its pods need.
	CostReplacement CostReplacement `json:"costReplacement"`
	// FeatureGates are Karpenter's feature gates, as Name=bool pairs separated by commas.
	// Gates left out keep Karpenter's defaults.
	FeatureGates string `json:"featureGates" env:"FEATURE_GATES" default:"NodeRepair=false" pattern:"^([A-Za-z]+=(true|false)(,[A-Za-z]+=(true|false))*)?$"`
	// FlavorsConfigPath is the path of a YAML list of per-flavor overrides. The bundle sets it
	// when settings.flavors is not empty.
	FlavorsConfigPath string `json:"-" env:"FLAVORS_CONFIG_PATH" default:""`
	// AcceptanceTimeout bounds how long Create waits for the node-group operator's decision
	// on a NodeGroup (accepted and Creating, or refused); past it the launch proceeds, and the
	// launch follower acts on a decision published later. The decision is the operator's
	// first status write, about 1 s after creation, and core's cluster state stays unsynced
	// (no provisioning, no disruption cluster-wide) while Create waits: a few seconds covers
	// a slow operator without stalling the cluster.
	AcceptanceTimeout Duration `json:"acceptanceTimeout" env:"NODEGROUP_ACCEPTANCE_TIMEOUT" default:"10s"`
	// SyncOverdueAfter is how long after its creation a launched NodeGroup may stay short of
	// Synced before the launch follower reports it (gauge and NodeClaim event; nothing is
	// deleted). Live groups sync in 38–58 s and one took 6 min 30 s and then worked: 10 min
	// leaves that outlier alone and still warns 5 min before core's registration timeout.
	SyncOverdueAfter Duration `json:"syncOverdueAfter" env:"NODEGROUP_SYNC_OVERDUE_AFTER" default:"10m"`
	// LaunchGiveUpAfter is how long after its creation a launched NodeGroup that still has no
	// node (no Node object of the group in the cluster), while its NodeClaim is unregistered, is
	// given up, whatever the group's status says (Creating, an UpstreamError the operator
	// retries, Synced, or nothing): the launch follower deletes the NodeClaim, so Karpenter
	// plans again at once and deletes the group (NodeClaim event, metric). A group with a node
	// is never given up. Every live node joined within 185 s of its group's creation (the
	// 6 min 30 s outlier is a time to Synced, not to a node): 3m30s is that bound plus 25 s, for
	// an operator still at work whose retry starts the VM late, and leaves 90 s of the
	// 5 minutes in which a dead launch's pod should run on its replacement, enough for a
	// replacement whose node joins in the usual 26–60 s. A longer time delays every dead
	// launch's replacement by as much. Must be below 15m: by then Karpenter has failed the
	// claim itself.
	LaunchGiveUpAfter Duration `json:"launchGiveUpAfter" env:"NODEGROUP_LAUNCH_GIVE_UP_AFTER" default:"3m30s" below:"15m"`
	// StoppedLaunchGiveUpAfter replaces LaunchGiveUpAfter, when shorter, for a group with no node
	// that the operator stopped working on: ReconcileInProgress=False with a ReconcileFailed
	// reason other than the UpstreamError it retries on its own. Nothing more is started then,
	// and a VM already started joins within 185 s of its group's creation: 3m10s is that bound
	// plus 5 s for the whole-second creation time and the node check. Must be below 15m.
	StoppedLaunchGiveUpAfter Duration `json:"stoppedLaunchGiveUpAfter" env:"NODEGROUP_STOPPED_LAUNCH_GIVE_UP_AFTER" default:"3m10s" below:"15m"`
	// Pricing configures the dynamic price and flavor refresher.
	Pricing Pricing `json:"pricing"`
	// Quota is the organisation quota, control plane included, when you know it. Zero means
	// unknown: the limit is then inferred from the platform's verdicts on launches (an
	// accepted launch proves the use it brings fits, a refused one rules that use out), or
	// read from a refusal's message on a cluster whose operator still writes one.
	Quota Quota `json:"quota"`
}

// CostReplacement is the provider's part of consolidation: Karpenter replaces a node with
// one cheaper node, never with several smaller ones, so a node that filled up the largest
// flavor with pods that fit smaller, better-shaped flavors stays as it is (docs/cost.md).
// Such a node is reported drifted (reason IllShaped), and Karpenter's drift replaces it: its
// disruption budgets, do-not-disrupt and the NodePool's consolidateAfter apply, and only pools
// that consolidate when underutilized (consolidationPolicy WhenEmptyOrUnderutilized) and are
// cost-steered have their nodes replaced.
type CostReplacement struct {
	// Enabled lets the provider report a node drifted, reason IllShaped, when the pods it runs
	// would cost at least a tenth less on the smaller nodes cost steering offers them: core's
	// consolidation replaces a node with one cheaper node, never with several (docs/cost.md).
	// Karpenter's drift then replaces it, within the NodePool's disruption budgets and
	// do-not-disrupt, and only in pools that consolidate when underutilized, once their
	// consolidateAfter has passed. It needs CostSteering, whose offer the replacement takes.
	Enabled bool `json:"enabled" env:"COST_REPLACEMENT_ENABLED" default:"true"`
	// MinNodeAge is how long a node runs before it may be replaced for its shape, so that no
	// node, a replacement included, is replaced for its shape within that time of its launch.
	MinNodeAge Duration `json:"minNodeAge" env:"COST_REPLACEMENT_MIN_NODE_AGE" default:"1h"`
}

// Quota is the organisation quota CKE enforces on the sum of every node.
type Quota struct {
	// CPU is the quota in vCPUs (CKE's default is 40); 0 learns it.
	CPU int `json:"cpu" env:"CLEVER_CLOUD_QUOTA_CPU" default:"0" min:"0" max:"1000000"`
	// Memory is the quota in nominal GB (CKE's default is 40); 0 learns it.
	Memory int `json:"memory" env:"CLEVER_CLOUD_QUOTA_MEMORY_GB" default:"0" min:"0" max:"1000000"`
}

// Pricing configures the refresher that reads flavor prices and availability from Clever
// Cloud's public, token-less API.
type Pricing struct {
	// Enabled turns the refresher on. The binary defaults to off; the bundle turns it on.
	Enabled bool `json:"enabled" env:"PRICING_REFRESH_ENABLED" default:"false"`
	// RefreshPeriod is how often prices and the available-flavor list are refreshed.
	RefreshPeriod Duration `json:"refreshPeriod" env:"PRICING_REFRESH_PERIOD" default:"12h"`
	// APIURL is the base URL of the public API, used for both endpoints.
	APIURL string `json:"apiURL" env:"PRICING_API_URL" default:"https://api.clever-cloud.com" format:"url"`
	// KubernetesProductURL is the full URL of the kubernetes-product endpoint; empty derives
	// it from APIURL.
	KubernetesProductURL string `json:"kubernetesProductURL,omitempty" env:"PRICING_PRODUCT_URL" default:"" format:"url"`
	// PriceSystemURL is the full URL of the billing price-system endpoint; empty derives it
	// from APIURL.
	PriceSystemURL string `json:"priceSystemURL,omitempty" env:"PRICING_PRICE_SYSTEM_URL" default:"" format:"url"`
}

// ProductURL is the kubernetes-product endpoint to read.
func (p Pricing) ProductURL() string {
	if p.KubernetesProductURL != "" {
		return p.KubernetesProductURL
	}
	return strings.TrimSuffix(p.APIURL, "/") + "/v4/kubernetes-product"
}

// PriceSystemEndpoint is the price-system endpoint to read, without its zone_id query.
func (p Pricing) PriceSystemEndpoint() string {
	if p.PriceSystemURL != "" {
		return p.PriceSystemURL
	}
	return strings.TrimSuffix(p.APIURL, "/") + "/v4/billing/price-system"
}

// Duration is a time.Duration spelled as Go spells it ("90s", "12h") in the environment and
// in the values.
type Duration struct{ time.Duration }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Defaults are the settings of a controller started with an empty environment.
func Defaults() Settings {
	s, err := load(func(string) (string, bool) { return "", false })
	if err != nil {
		panic(fmt.Sprintf("settings defaults do not parse: %v", err))
	}
	return s
}

// Load reads the settings of a starting controller from the process environment. A value the
// controller refuses does not stop it when its setting has a safe default: the setting runs
// on its default, the refusal is reported (stderr, and karpenter_clevercloud_settings_refused,
// which KarpenterCleverCloudSettingRefused alerts on) and the default is written back to the
// environment, since Karpenter core reads some of the same variables itself and would
// otherwise exit on them. A process keeps nothing from an earlier start, so the default is the
// last good value it knows. The error names every refused setting that has no safe default
// (Region).
func Load() (Settings, error) {
	s, refused, err := Lenient(os.LookupEnv)
	for _, r := range refused {
		fmt.Fprintf(os.Stderr, "karpenter-clevercloud: %v\n", r)
		if err := os.Setenv(r.Env, r.Default); err != nil {
			return s, fmt.Errorf("%s: writing back its default: %w", r.Env, err)
		}
	}
	ReportRefusals(refused)
	return s, err
}

// LoadFrom reads the settings from a lookup function, strictly: the error names every
// variable that is wrong. For tests and for the bundle's checks.
func LoadFrom(lookup func(string) (string, bool)) (Settings, error) { return load(lookup) }

// Refusal is a setting whose value the controller refused, and the default it runs on.
type Refusal struct {
	// Path is the setting's path under values.settings; Env its variable.
	Path, Env string
	// Value is the value refused, as the environment spelled it.
	Value string
	// Default is the value used instead, as the environment spells it.
	Default string
	// Err says why the value was refused.
	Err error
}

func (r Refusal) Error() string {
	return fmt.Sprintf("%s=%q: %v; running on its default %q (settings.%s)", r.Env, r.Value, r.Err, r.Default, r.Path)
}

// Lenient reads the settings as Load does, without touching the process: each refused value
// of a setting with a safe default is replaced by that default and returned as a Refusal; the
// error names the refused settings that have none.
func Lenient(lookup func(string) (string, bool)) (Settings, []Refusal, error) {
	var refused []Refusal
	var errs []error
	s := read(lookup, func(f Field, raw string, err error) {
		if f.Rule().NoFallback {
			errs = append(errs, fmt.Errorf("%s=%q: %w (no default is safe: fix settings.%s)", f.Env, raw, err, f.Path))
			return
		}
		if derr := f.set(f.Default); derr != nil {
			panic(fmt.Sprintf("settings: default of %s does not parse: %v", f.Path, derr))
		}
		refused = append(refused, Refusal{Path: f.Path, Env: f.Env, Value: raw, Default: f.Default, Err: err})
	})
	return s, refused, errors.Join(errs...)
}

func load(lookup func(string) (string, bool)) (Settings, error) {
	var errs []error
	s := read(lookup, func(f Field, raw string, err error) {
		errs = append(errs, fmt.Errorf("%s=%q: %w", f.Env, raw, err))
	})
	return s, errors.Join(errs...)
}

// read sets every field from lookup, or from its default when unset, and hands refuse each
// field whose value its rule refuses, with the value as the environment spelled it.
func read(lookup func(string) (string, bool), refuse func(f Field, raw string, err error)) Settings {
	var s Settings
	Walk(func(f Field) {
		raw, ok := lookup(f.Env)
		if !ok {
			raw = f.Default
		}
		if err := f.set(strings.TrimSpace(raw)); err != nil {
			refuse(f, raw, err)
		}
	}, &s)
	return s
}

// Field is one environment-backed setting.
type Field struct {
	// Path is the JSON path of the field in the values' settings tree, e.g. "pricing.enabled".
	Path string
	// Env is the environment variable that carries it.
	Env string
	// Default is the default, as the environment spells it.
	Default string
	// Tag is the struct field's tag, for the schema generator's constraints.
	Tag   reflect.StructTag
	value reflect.Value
}

// Walk calls fn for every environment-backed field of s, depth first, in declaration order.
func Walk(fn func(Field), s *Settings) {
	walk(fn, reflect.ValueOf(s).Elem(), "")
}

func walk(fn func(Field), v reflect.Value, prefix string) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		name := strings.Split(sf.Tag.Get("json"), ",")[0]
		path := prefix + name
		if name == "-" {
			path = prefix + sf.Name
		}
		if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[Duration]() {
			walk(fn, v.Field(i), path+".")
			continue
		}
		env, ok := sf.Tag.Lookup("env")
		if !ok {
			continue
		}
		fn(Field{Path: path, Env: env, Default: sf.Tag.Get("default"), Tag: sf.Tag, value: v.Field(i)})
	}
}

func (f Field) set(raw string) error {
	r := f.Rule()
	switch p := f.value.Addr().Interface().(type) {
	case *string:
		if err := r.checkString(raw); err != nil {
			return err
		}
		*p = raw
	case *bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return errors.New("not a boolean (true or false)")
		}
		*p = b
	case *int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return errors.New("not an integer")
		}
		if r.Min != nil && n < *r.Min {
			return fmt.Errorf("below the minimum %d", *r.Min)
		}
		if r.Max != nil && n > *r.Max {
			return fmt.Errorf("above the maximum %d", *r.Max)
		}
		*p = n
	case *Duration:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return errors.New(`not a duration such as "30s" or "12h"`)
		}
		if d <= 0 {
			return errors.New("must be positive")
		}
		if r.Below > 0 && d >= r.Below {
			return fmt.Errorf("must be below %s", r.BelowText)
		}
		p.Duration = d
	default:
		panic(fmt.Sprintf("settings: field %s has unsupported type %T", f.Path, p))
	}
	return nil
}

func (r Rule) checkString(raw string) error {
	if len(r.Enum) > 0 && !slices.Contains(r.Enum, raw) {
		return fmt.Errorf("must be one of %s", strings.Join(r.Enum, ", "))
	}
	if r.Pattern != "" && !mustCompile(r.Pattern).MatchString(raw) {
		return fmt.Errorf("must match %s", r.Pattern)
	}
	if r.URL && raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !mustCompile(URLPattern).MatchString(raw) {
			return errors.New("must be an absolute http(s) URL")
		}
	}
	return nil
}

func mustParseDuration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(fmt.Sprintf("settings: bad duration bound %q", s))
	}
	return d
}
