# The report (bench/report, `tristore report`): TestReportInChromium opens
# the generated page in headless Chromium (DOM of inline SVG, screenshot).
# fonts-liberation has the faces gonum/plot measures its text with, so the
# page's plot labels render at the widths they were laid out for.
APT_PKGS+=(chromium fonts-liberation)
