// Test helper: parse a document with libxml2 (an independent XML parser) and
// count elements by name; -1 when the document is not well-formed.
#pragma once

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <string>
#include <vector>

namespace tandem::testing {

inline int count_xml_elements(const std::string& doc_text, const char* name) {
  xmlDocPtr doc = xmlReadMemory(doc_text.data(), static_cast<int>(doc_text.size()), "doc.xml", nullptr,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  if (!doc) return -1;
  int count = 0;
  std::vector<xmlNodePtr> stack{xmlDocGetRootElement(doc)};
  while (!stack.empty()) {
    xmlNodePtr n = stack.back();
    stack.pop_back();
    for (; n; n = n->next) {
      if (n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0) ++count;
      if (n->children) stack.push_back(n->children);
    }
  }
  xmlFreeDoc(doc);
  return count;
}

}  // namespace tandem::testing
