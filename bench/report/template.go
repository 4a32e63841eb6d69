package report

// pageHTML is the report page. Everything is inline (CSS, SVG): the file
// opens offline, mailed or archived, and shows the same.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tristore workbench report</title>
<style>
body { font-family: 'Liberation Sans', Arimo, Arial, Helvetica, sans-serif; margin: 1.5em; color: #1a1a1a; background: #fff; }
h1 { font-size: 1.6em; margin: 0 0 .2em; }
h2 { font-size: 1.3em; margin: 1.6em 0 .4em; border-bottom: 2px solid #d0d7de; padding-bottom: .2em; }
h2 small { font-weight: normal; color: #57606a; font-size: .7em; }
h3 { font-size: 1.05em; margin: 1.2em 0 .3em; }
p.meta, p.note, figcaption, footer { color: #57606a; font-size: .9em; }
table { border-collapse: collapse; font-size: .85em; margin: .3em 0 1em; }
th, td { border: 1px solid #d0d7de; padding: .25em .55em; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; }
td.l, th.l { text-align: left; }
td.w { white-space: normal; }
table.runs { width: 100%; }
tr.err td { background: #fff1f0; }
.partial { color: #fff; background: #cf222e; padding: 0 .4em; border-radius: 3px; font-weight: bold; font-size: .85em; }
.banner { border: 2px solid #cf222e; background: #fff1f0; padding: .5em .8em; margin: .5em 0; }
.figs { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; border: 1px solid #d0d7de; padding: .4em; background: #fff; }
figcaption { max-width: 500px; }
figure svg { display: block; max-width: 100%; height: auto; }
.better { color: #1a7f37; } .worse { color: #cf222e; }
</style>
</head>
<body>
<h1>tristore workbench report</h1>
<p class="meta">Generated {{ts .Generated}} from {{len .Runs}} saved run(s); every table and plot is drawn from the records in the results directories.
Exports beside this page: <a href="summary.csv">summary.csv</a>, <a href="summary.json">summary.json</a>{{if .Comparison}}, <a href="compare.csv">compare.csv</a>, <a href="compare.json">compare.json</a>{{end}}.</p>

<h2>Runs</h2>
<table class="runs">
<tr><th class="l">run</th><th class="l">suite</th><th class="l">target</th><th class="l">network</th><th>scale</th><th class="l">started (UTC)</th><th>took</th><th>requests</th><th>errors</th><th class="l">state</th><th class="l">client</th></tr>
{{range .Runs}}<tr{{if .Partial}} class="err"{{end}}><td class="l w">{{.Label}}</td><td class="l">{{.Meta.Suite}}</td><td class="l w">{{.Meta.Target}}</td><td class="l">{{with .Meta.Network}}{{.}}{{else}}–{{end}}</td><td>{{.Meta.Scale}}</td><td class="l">{{start .Meta.Start}}</td><td>{{took .}}</td><td>{{.Meta.Ops}}</td><td>{{.Meta.Errors}}</td><td class="l">{{if .Partial}}<span class="partial">PARTIAL</span>{{else}}complete{{end}}</td><td class="l w"><span title="{{.Meta.Machine.CPUModel}}, kernel {{.Meta.Machine.Kernel}}, {{.Meta.Machine.GoVersion}}{{with .Meta.Machine.GitRev}}, tristore {{.}}{{end}}">{{.Meta.Machine.Hostname}}: {{.Meta.Machine.NProc}} CPUs, load {{f1 (index .Meta.Machine.LoadStart 0)}}</span></td></tr>
{{end}}</table>
{{range .Runs}}{{if .Partial}}<div class="banner"><span class="partial">PARTIAL</span> <b>{{.Label}}</b> ({{.Dir}}) did not finish: {{.Meta.Error}}. Its figures and tables show the requests recorded before it stopped.</div>
{{end}}{{if .ReadError}}<div class="banner">The records of <b>{{.Label}}</b> could not all be read: {{.ReadError}}</div>
{{end}}{{with .Meta.CleanupError}}<div class="banner">Cleanup failed; the run's working directory may be left on the target: {{.}}</div>
{{end}}{{end}}
{{with .Comparison}}
<section id="compare">
<h2>Comparison <small>A = {{.A.Label}}{{if .A.Partial}} (partial){{end}}, B = {{.B.Label}}{{if .B.Partial}} (partial){{end}}; ratios are B ÷ A</small></h2>
<table class="compare">
<tr><th class="l">phase</th><th class="l">form</th><th>unit</th><th>threads</th><th>ops A</th><th>ops B</th><th>MB/s A</th><th>MB/s B</th><th>MB/s B÷A</th><th>p50 A</th><th>p50 B</th><th>p50 B÷A</th></tr>
{{range .Rows}}<tr{{if or .ErrorsA .ErrorsB}} class="err"{{end}}><td class="l">{{.Phase}}</td><td class="l">{{form .Form}}</td><td>{{size .Unit}}</td><td>{{.Threads}}</td><td>{{if .InA}}{{.OpsA}}{{else}}–{{end}}</td><td>{{if .InB}}{{.OpsB}}{{else}}–{{end}}</td><td>{{f2 .MBpsA}}</td><td>{{f2 .MBpsB}}</td><td>{{ratio .MBpsRatio}}</td><td>{{dur .P50A}}</td><td>{{dur .P50B}}</td><td>{{ratio .P50Ratio}}</td></tr>
{{end}}</table>
</section>
{{end}}
{{range .Sections}}
<section class="suite" id="suite-{{.Suite}}">
<h2>{{.Suite}}{{with .Seed}} <small>{{.}}</small>{{end}}</h2>
{{with .Note}}<p class="note">{{.}}</p>{{end}}
<div class="figs">
{{range .Figures}}<figure>{{svg .SVG}}<figcaption>{{.Caption}}</figcaption></figure>
{{end}}</div>
{{range .Tables}}<h3>{{.Title}}</h3>
<table class="seed">
<tr>{{range $i, $h := .Header}}<th{{if not $i}} class="l"{{end}}>{{$h}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}<td{{if not $i}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{range .Runs}}{{$r := .}}
<h3>{{.Label}}{{if .Partial}} <span class="partial">PARTIAL</span>{{end}}</h3>
<table class="rows">
<tr><th class="l">phase</th><th class="l">form</th><th>unit</th><th>threads</th><th>ops</th><th>errors</th><th>MB/s</th><th>ops/s</th><th>p50</th><th>p99</th><th>first byte p50</th>{{if hasWire $r}}<th>payload</th><th>wire up</th><th>wire down</th><th>efficiency</th>{{end}}</tr>
{{range .Rows}}<tr{{if .Errors}} class="err"{{end}}><td class="l">{{.Phase}}</td><td class="l">{{form .Form}}</td><td>{{size .Unit}}</td><td>{{.Threads}}</td><td>{{.Ops}}</td><td>{{.Errors}}</td><td>{{f2 .MBps}}</td><td>{{f1 .OpsPerSec}}</td><td>{{dur .P50}}</td><td>{{dur .P99}}</td><td>{{dur .FirstByteP50}}</td>{{if hasWire $r}}<td>{{.Payload}}</td><td>{{.WireUp}}</td><td>{{.WireDown}}</td><td>{{if .Efficiency}}{{f3 .Efficiency}}{{else}}–{{end}}</td>{{end}}</tr>
{{end}}</table>
{{range .Rows}}{{if .Errors}}<p class="note">errors in {{.Phase}} {{size .Unit}} ×{{.Threads}}: {{.Errors}} of {{.Ops}} failed, e.g. {{.FirstError}}</p>{{end}}{{end}}
{{end}}
</section>
{{end}}
<footer>tristore report · MB/s = 10⁶ bytes/s of successful payload over the group's wall time (first request start to last end); latencies are nearest-rank percentiles of the successful requests.</footer>
</body>
</html>
`
