// Tables for the report: fixed-width text (report.txt), CSV (RFC 4180, what
// spreadsheets read) and a LaTeX booktabs table (\toprule/\midrule/\bottomrule,
// text escaped) ready for \input in a paper.
#pragma once

#include <string>
#include <vector>

namespace tandem::report {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as long as the header
  std::string align;                           // LaTeX column spec, one letter per column ("lrrr"); empty: l then r
};

// Columns padded to their widest field, the first left-aligned and the rest
// right-aligned, each line indented two spaces, a rule under the header.
std::string to_text(const Table& t);

// Quotes a field when it holds a comma, a quote, CR or LF (quotes doubled).
std::string csv_field(const std::string& field);
std::string to_csv(const Table& t);

// Escapes LaTeX's special characters: \ & % $ # _ { } ~ ^.
std::string latex_escape(const std::string& text);
std::string to_latex(const Table& t, const std::string& caption, const std::string& label);

}  // namespace tandem::report
