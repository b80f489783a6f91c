package site

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// single are the options of a site with one broker and one orchestrator.
func single(listen string, mod func(*Options)) Options {
	o := Options{Dir: "/site", Agents: []Agent{{"code", "code-1"}}, NATS: []string{"nats://nas.lan:4222"}, Listen: listen,
		DataRoot: "/var/lib/chiffon", BrokerListen: "0.0.0.0:4222"}
	if mod != nil {
		mod(&o)
	}
	return o
}

// group are the options of a site with a cluster and a group of n.
func group(n int, mod func(*Options)) Options {
	o := single("0.0.0.0:8080", func(o *Options) {
		o.NATS = []string{"nats://n1.lan:4222", "nats://n2.lan:4223", "nats://n3.lan"}
		o.BrokerListen = "10.0.0.9:4222"
		o.HA = &HA{Orchestrators: n, Group: "main"}
	})
	if mod != nil {
		mod(&o)
	}
	return o
}

// TestLayoutNamesTheBrokerAndTheAPIByWhereTheyListen: the broker's certificate
// names --broker-host or the hosts of the NATS URLs; the API gets a
// certificate only beyond loopback, for --api-host, else the host it listens
// on, else (a wildcard) the broker's names, or in a group every
// orchestrator's host.
func TestLayoutNamesTheBrokerAndTheAPIByWhereTheyListen(t *testing.T) {
	for _, tc := range []struct {
		name                string
		opts                Options
		brokerHosts, apiURL []string
		apiHosts            []string
	}{
		{"loopback", single("127.0.0.1:8080", nil), []string{"nas.lan"}, nil, nil},
		{"localhost with --api-host", single("localhost:8080", func(o *Options) { o.APIHosts = []string{"o.lan"} }), []string{"nas.lan"}, nil, []string{"o.lan"}},
		{"an address", single("192.168.1.10:8080", nil), []string{"nas.lan"}, nil, []string{"192.168.1.10"}},
		{"a wildcard", single("0.0.0.0:8080", func(o *Options) { o.BrokerHosts = []string{"hub.lan", "10.0.0.2"} }),
			[]string{"hub.lan", "10.0.0.2"}, nil, []string{"hub.lan", "10.0.0.2"}},
		{"a wildcard and --api-host", single(":8080", func(o *Options) { o.APIHosts = []string{"o.lan"} }), []string{"nas.lan"}, nil, []string{"o.lan"}},
		{"a group", group(2, nil), []string{"n1.lan", "n2.lan", "n3.lan"},
			[]string{"https://n1.lan:8080", "https://n2.lan:8080"}, []string{"n1.lan", "n2.lan"}},
		{"a group with --api-host and hosts", group(3, func(o *Options) {
			o.APIHosts = []string{"chiffon.lan"}
			o.HA.OrchestratorHosts = []string{"o1", "o2", "o3"}
		}), []string{"n1.lan", "n2.lan", "n3.lan"},
			[]string{"https://o1:8080", "https://o2:8080", "https://o3:8080"}, []string{"chiffon.lan", "o1", "o2", "o3"}},
		{"a group on loopback", group(2, func(o *Options) { o.Listen = "127.0.0.1:9000" }), []string{"n1.lan", "n2.lan", "n3.lan"},
			[]string{"http://n1.lan:9000", "http://n2.lan:9000"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.opts.Layout()
			if err != nil {
				t.Fatal(err)
			}
			// A name may come twice (a group's fallback hosts are added to themselves): a certificate takes it.
			if !slices.Equal(l.Spec.BrokerHosts, tc.brokerHosts) || !slices.Equal(names(l.Spec.APIHosts), names(tc.apiHosts)) ||
				(l.Spec.APIHosts == nil) != (tc.apiHosts == nil) {
				t.Errorf("broker %q, API %q; want %q, %q", l.Spec.BrokerHosts, l.Spec.APIHosts, tc.brokerHosts, tc.apiHosts)
			}
			var urls, files []string
			for _, o := range l.Orchestrators {
				if o.Advertise != "" {
					urls = append(urls, o.Advertise)
				}
				files = append(files, o.File+" "+o.DataDir)
			}
			if !slices.Equal(urls, tc.apiURL) {
				t.Errorf("advertised %q, want %q", urls, tc.apiURL)
			}
			if tc.opts.HA == nil && !slices.Equal(files, []string{"orchestrator.yaml /var/lib/chiffon/orchestrator"}) ||
				tc.opts.HA != nil && (len(files) != tc.opts.HA.Orchestrators || files[1] != "orchestrator-2.yaml /var/lib/chiffon/orchestrator-2" ||
					!slices.Equal(l.Spec.Orchestrators[:2], []string{"orchestrator-1", "orchestrator-2"})) {
				t.Errorf("orchestrators %q (spec %q)", files, l.Spec.Orchestrators)
			}
		})
	}
}

// names are hosts sorted, each once.
func names(hosts []string) []string { return slices.Compact(slices.Sorted(slices.Values(hosts))) }

// TestLayoutOfTheClusterListensOnEachURLsPort: node i listens on the host of
// --broker-listen at the port of NATS URL i and of route URL i, advertises its
// route URL, routes to the two others, and its certificate names both URLs'
// hosts.
func TestLayoutOfTheClusterListensOnEachURLsPort(t *testing.T) {
	l, err := group(2, func(o *Options) {
		o.HA.Routes = []string{"nats-route://r1.lan:7000", "nats-route://n2.lan", "nats-route://n3.lan:6222"}
	}).Layout()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"broker-1 [n1.lan r1.lan] 10.0.0.9:4222 10.0.0.9:7000 r1.lan:7000 [nats-route://n2.lan nats-route://n3.lan:6222]",
		"broker-2 [n2.lan] 10.0.0.9:4223 10.0.0.9:6222 n2.lan:6222 [nats-route://r1.lan:7000 nats-route://n3.lan:6222]",
		"broker-3 [n3.lan] 10.0.0.9:4222 10.0.0.9:6222 n3.lan:6222 [nats-route://r1.lan:7000 nats-route://n2.lan]",
	}
	var got []string
	for _, n := range l.Nodes {
		got = append(got, n.Name+" ["+strings.Join(n.Hosts, " ")+"] "+n.ClientListen+" "+n.RouteListen+" "+n.RouteAdvertise+
			" ["+strings.Join(n.Routes, " ")+"]")
	}
	if !slices.Equal(got, want) {
		t.Errorf("nodes\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if len(l.Spec.Nodes) != 3 || l.Spec.Nodes[0].Name != "broker-1" || !slices.Equal(l.Spec.Nodes[0].Hosts, []string{"n1.lan", "r1.lan"}) {
		t.Errorf("spec's nodes %v", l.Spec.Nodes)
	}
}

// TestLayoutRefusesWhatItCannotWrite: an option that cannot make a site is an
// error that names its flag, and the directory is left alone.
func TestLayoutRefusesWhatItCannotWrite(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{single("127.0.0.1:8080", func(o *Options) { o.NATS = []string{"::bad"} }), `--nats "::bad": not a URL`},
		{single("nope", nil), `--listen "nope"`},
		{group(2, func(o *Options) { o.NATS = o.NATS[:2] }), "--ha needs 3 --nats URLs, one per node of the cluster; got 2"},
		{group(4, nil), "--orchestrators must be 2 or 3, got 4"},
		{group(2, func(o *Options) { o.HA.Routes = []string{"nats-route://a"} }), "--cluster-routes needs 3 URLs"},
		{group(2, func(o *Options) { o.HA.Routes = []string{"nats-route://a", "::x", "nats-route://c"} }), `--cluster-routes "::x"`},
		{group(3, func(o *Options) { o.HA.OrchestratorHosts = []string{"a"} }), "--orchestrator-host needs 3 hosts"},
		{group(2, func(o *Options) { o.HA.Group = "" }), "--group must not be empty"},
		{group(2, func(o *Options) { o.BrokerListen = "bad" }), `--broker-listen "bad"`},
		{group(2, func(o *Options) { o.Listen = "nope" }), `--listen "nope"`},
	} {
		dir := filepath.Join(t.TempDir(), "site")
		tc.opts.Dir = dir
		if _, err := tc.opts.Layout(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%q: Layout wrote %s", tc.want, dir)
		}
	}
}

// TestLayoutPutsTheSecretsUnderDirUnlessTold: the configs name the secret
// files where they will be on the hosts: --secrets-dir, or Dir/secrets made
// absolute.
func TestLayoutPutsTheSecretsUnderDirUnlessTold(t *testing.T) {
	l, err := single("127.0.0.1:8080", func(o *Options) { o.Dir = "rel/site" }).Layout()
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := filepath.Abs("rel/site/secrets"); l.SecretsDir != want {
		t.Errorf("SecretsDir %q, want %q", l.SecretsDir, want)
	}
	l, err = single("127.0.0.1:8080", func(o *Options) { o.SecretsDir = "/etc/chiffon" }).Layout()
	if err != nil || l.SecretsDir != "/etc/chiffon" {
		t.Errorf("SecretsDir %q, %v; want /etc/chiffon", l.SecretsDir, err)
	}
}

// TestLayoutGivesOrchestratorsOnOneHostTheirOwnPorts: orchestrators of a group
// that share a host listen, and are advertised, on ports one apart; those on
// hosts of their own keep --listen's port.
func TestLayoutGivesOrchestratorsOnOneHostTheirOwnPorts(t *testing.T) {
	for _, tc := range []struct {
		hosts []string
		want  []string
	}{
		{[]string{"nas.lan", "nas.lan", "pi.lan"}, []string{
			"0.0.0.0:8080 https://nas.lan:8080", "0.0.0.0:8081 https://nas.lan:8081", "0.0.0.0:8080 https://pi.lan:8080"}},
		{[]string{"a.lan", "b.lan"}, []string{"0.0.0.0:8080 https://a.lan:8080", "0.0.0.0:8080 https://b.lan:8080"}},
	} {
		l, err := group(len(tc.hosts), func(o *Options) { o.HA.OrchestratorHosts = tc.hosts }).Layout()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, o := range l.Orchestrators {
			got = append(got, o.Listen+" "+o.Advertise)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("hosts %v: orchestrators\n  %s\nwant\n  %s", tc.hosts, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
		}
	}
}
