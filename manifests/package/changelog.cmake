# Writes the package's Debian changelog: one entry, for VERSION, dated DATE
# (an ISO 8601 UTC time), to OUT.  cmake -DOUT=.. -DVERSION=.. -DDATE=.. -P
string(REGEX MATCH "^([0-9]+)-([0-9]+)-([0-9]+)T([0-9:]+)" _ "${DATE}")
set(y ${CMAKE_MATCH_1})
set(m ${CMAKE_MATCH_2})
set(d ${CMAKE_MATCH_3})
set(t ${CMAKE_MATCH_4})
# Day of the week by Zeller's congruence, as Debian's date format names it.
set(mm ${m})
set(yy ${y})
if(m LESS 3)
  math(EXPR mm "${m} + 12")
  math(EXPR yy "${y} - 1")
endif()
math(EXPR h "(${d} + (13 * (${mm} + 1)) / 5 + ${yy} % 100 + (${yy} % 100) / 4 + (${yy} / 100) / 4 + 5 * (${yy} / 100)) % 7")
set(days Sat Sun Mon Tue Wed Thu Fri)
set(months Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec)
list(GET days ${h} wd)
math(EXPR mi "${m} - 1")
list(GET months ${mi} mon)
file(WRITE "${OUT}" "kcm (${VERSION}) unstable; urgency=medium

  * Release ${VERSION}: see CHANGELOG.md in the source for what changed.

 -- kcm maintainers <kcm@kcm-project.dev>  ${wd}, ${d} ${mon} ${y} ${t} +0000
")
