<%@ page contentType="text/html; charset=UTF-8" import="java.util.*" %><%--
  A word count over the request: the words of its parameters and the
  pairs of words that follow each other, then its header names, counted in
  a TreeMap (merge), kept per session, rendered as a table.
--%><%
    Map<String, Integer> counts = new TreeMap<>();
    for (Map.Entry<String, String[]> p : request.getParameterMap().entrySet()) {
        for (String value : p.getValue()) {
            String previous = null;
            for (String word : value.toLowerCase(Locale.ROOT).split(" ")) {
                if (word.isEmpty()) {
                    continue;
                }
                counts.merge(word, 1, Integer::sum);
                if (previous != null) {
                    counts.merge(previous + ' ' + word, 1, Integer::sum);
                }
                previous = word;
            }
        }
    }
    for (Enumeration<String> names = request.getHeaderNames(); names.hasMoreElements();) {
        String name = names.nextElement();
        counts.merge(name, request.getHeader(name).length(), Integer::sum);
    }
    Integer visits = (Integer) session.getAttribute("visits");
    session.setAttribute("visits", visits == null ? 1 : visits + 1);
%><html><body><h1>Words</h1><table>
<% for (Map.Entry<String, Integer> e : counts.entrySet()) { %><tr><td><%= e.getKey() %></td><td><%= e.getValue() %></td></tr>
<% } %></table></body></html>
