#include "report/tables.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"

namespace tandem::report {

namespace {
void check_shape(const Table& t) {
  TANDEM_CHECK(!t.header.empty(), "table has no columns");
  for (size_t i = 0; i < t.rows.size(); ++i)
    TANDEM_CHECK(t.rows[i].size() == t.header.size(), "table row {} has {} fields, the header has {}", i,
                 t.rows[i].size(), t.header.size());
  TANDEM_CHECK(t.align.empty() || t.align.size() == t.header.size(), "table alignment '{}' is not one per column",
               t.align);
}

std::string join(const std::vector<std::string>& fields, const std::string& sep, std::string (*f)(const std::string&)) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) out += (i ? sep : "") + f(fields[i]);
  return out;
}
}  // namespace

std::string to_text(const Table& t) {
  check_shape(t);
  std::vector<size_t> width(t.header.size(), 0);
  for (size_t c = 0; c < t.header.size(); ++c) width[c] = t.header[c].size();
  for (const auto& row : t.rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& fields) {
    std::string s = " ";
    for (size_t c = 0; c < fields.size(); ++c)
      s += c == 0 ? fmt::format(" {:<{}}", fields[c], width[c]) : fmt::format("  {:>{}}", fields[c], width[c]);
    return s + "\n";
  };
  std::string out = line(t.header);
  size_t total = 1;
  for (size_t w : width) total += w + 2;
  out += "  " + std::string(total - 1, '-') + "\n";
  for (const auto& row : t.rows) out += line(row);
  return out;
}

std::string csv_field(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string to_csv(const Table& t) {
  check_shape(t);
  std::string out = join(t.header, ",", csv_field) + "\n";
  for (const auto& row : t.rows) out += join(row, ",", csv_field) + "\n";
  return out;
}

std::string latex_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '\\': out += "\\textbackslash{}"; break;
      case '&':
      case '%':
      case '$':
      case '#':
      case '_':
      case '{':
      case '}': out += std::string("\\") + c; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      default: out += c;
    }
  }
  return out;
}

std::string to_latex(const Table& t, const std::string& caption, const std::string& label) {
  check_shape(t);
  std::string align = t.align;
  if (align.empty()) {
    align.assign(1, 'l');
    align.append(t.header.size() - 1, 'r');
  }
  std::string out = "% Requires \\usepackage{booktabs}.\n\\begin{table}[ht]\n\\centering\n";
  out += fmt::format("\\caption{{{}}}\n\\label{{{}}}\n", latex_escape(caption), label);
  out += fmt::format("\\begin{{tabular}}{{{}}}\n\\toprule\n", align);
  out += join(t.header, " & ", latex_escape) + " \\\\\n\\midrule\n";
  for (const auto& row : t.rows) out += join(row, " & ", latex_escape) + " \\\\\n";
  out += "\\bottomrule\n\\end{tabular}\n\\end{table}\n";
  return out;
}

}  // namespace tandem::report
